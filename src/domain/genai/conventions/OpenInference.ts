import { isRecord, parsed, set, textOf, type ConventionReading } from "./Reading.ts"

type Attrs = Readonly<Record<string, unknown>>

/**
 * The OpenInference attributes the mapping does not read itself: the project (a resource attribute Phoenix's
 * `register({projectName})` sets) and the `metadata` JSON object its `setMetadata` context puts on spans.
 * (`tag.tags`, `session.id` and `user.id` are read by the mapping.)
 */
export const readOpenInference = (a: Attrs, resource: Attrs, into: ConventionReading) => {
  set(into, "projectName", textOf(a["openinference.project.name"]) ?? textOf(resource["openinference.project.name"]))
  const metadata = parsed(a["metadata"])
  if (isRecord(metadata)) into.traceMetadata = { ...metadata, ...into.traceMetadata }
}

export const isOpenInferenceKey = (key: string) => key === "openinference.project.name" || key === "metadata"
