import type * as Errors from "./Errors.ts"

/** Any domain error: derived from the exports of Errors.ts, so a new error joins it by being declared there. */
export type DomainError = InstanceType<(typeof Errors)[keyof typeof Errors]>

/** The tags of the domain errors. */
export type DomainErrorTag = DomainError["_tag"]
