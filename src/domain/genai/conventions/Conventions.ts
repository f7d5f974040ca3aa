import { readLangGraph } from "./LangGraph.ts"
import { isLangfuseKey, readLangfuse } from "./Langfuse.ts"
import { isLaminarKey, readLaminar } from "./Laminar.ts"
import { isMastraKey, readMastra } from "./Mastra.ts"
import { isOpenInferenceKey, readOpenInference } from "./OpenInference.ts"
import type { ConventionReading } from "./Reading.ts"

export type { ConventionReading } from "./Reading.ts"

type Attrs = Readonly<Record<string, unknown>>

/** Everything the vendor conventions say about one span (docs/opentelemetry.md, "SDK conventions"). */
export const readConventions = (a: Attrs, resource: Attrs): ConventionReading => {
  const reading: ConventionReading = {}
  // Framework readers first: an SDK's own attributes, read after them, win where both say something.
  readMastra(a, reading)
  readLangGraph(a, reading)
  readLangfuse(a, reading)
  readLaminar(a, reading)
  readOpenInference(a, resource, reading)
  return reading
}

/** Whether an attribute is represented by a reading, so not repeated in the span's `metadata.attributes`. */
export const isConventionKey = (key: string) =>
  isLangfuseKey(key) || isLaminarKey(key) || isOpenInferenceKey(key) || isMastraKey(key)
