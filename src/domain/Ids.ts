import { Schema } from "effect"

export const AccountId = Schema.UUID.pipe(Schema.brand("AccountId"))
export type AccountId = typeof AccountId.Type

export const TraceId = Schema.UUID.pipe(Schema.brand("TraceId"))
export type TraceId = typeof TraceId.Type

export const SpanId = Schema.UUID.pipe(Schema.brand("SpanId"))
export type SpanId = typeof SpanId.Type

export const ProjectId = Schema.UUID.pipe(Schema.brand("ProjectId"))
export type ProjectId = typeof ProjectId.Type

export const JobId = Schema.UUID.pipe(Schema.brand("JobId"))
export type JobId = typeof JobId.Type

export const ForkId = Schema.UUID.pipe(Schema.brand("ForkId"))
export type ForkId = typeof ForkId.Type
