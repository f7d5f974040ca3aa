import { countOf, isRecord, objectAttribute, parsed, set, textOf, type ConventionReading } from "./Reading.ts"

type Attrs = Readonly<Record<string, unknown>>

/** Cache-read input tokens, as the Langfuse SDKs and the providers they wrap name them in usage_details. */
const CACHED_KEYS = ["input_cached_tokens", "cache_read_input_tokens", "input_cache_read", "cached_tokens"]

/**
 * Cached input tokens of a usage_details object: a flat key, else the provider's nested breakdown as the SDKs'
 * integrations pass it through (OpenAI `prompt_tokens_details.cached_tokens`, Responses API
 * `input_tokens_details.cached_tokens`, LangChain `input_token_details.cache_read`).
 */
const cachedOf = (usage: Record<string, unknown>): number | undefined => {
  for (const key of CACHED_KEYS) {
    const n = countOf(usage[key])
    if (n !== undefined) return n
  }
  for (const [outer, inner] of NESTED_CACHED) {
    const nested = usage[outer]
    const n = isRecord(nested) ? countOf(nested[inner]) : undefined
    if (n !== undefined) return n
  }
  return undefined
}
const NESTED_CACHED = [
  ["prompt_tokens_details", "cached_tokens"],
  ["input_tokens_details", "cached_tokens"],
  ["input_token_details", "cache_read"]
] as const

/**
 * The `langfuse.*` attributes the mapping does not read itself (it already reads the observation type, input,
 * output, model, usage and cost totals, level, trace name/input/output/tags, session and user): trace metadata,
 * environment, release and version, and the observation's metadata, model parameters, prompt and completion start.
 */
export const readLangfuse = (a: Attrs, into: ConventionReading) => {
  set(into, "traceMetadata", objectAttribute(a, "langfuse.trace.metadata"))
  set(into, "environment", textOf(a["langfuse.environment"]))
  set(into, "release", textOf(a["langfuse.release"]))
  set(into, "version", textOf(a["langfuse.version"]))

  const details: Record<string, unknown> = {}
  const observationMetadata = objectAttribute(a, "langfuse.observation.metadata")
  if (observationMetadata !== undefined) details.metadata = observationMetadata
  const parameters = parsed(a["langfuse.observation.model.parameters"])
  if (parameters !== undefined) details.model_parameters = parameters
  const promptName = textOf(a["langfuse.observation.prompt.name"])
  if (promptName !== undefined) {
    details.prompt = {
      name: promptName,
      ...(countOf(a["langfuse.observation.prompt.version"]) !== undefined
        ? { version: countOf(a["langfuse.observation.prompt.version"]) }
        : {})
    }
  }
  const completionStart = textOf(a["langfuse.observation.completion_start_time"])
  if (completionStart !== undefined) details.completion_start_time = parsed(completionStart)
  const level = textOf(a["langfuse.observation.level"])
  if (level !== undefined) details.level = level
  const statusMessage = textOf(a["langfuse.observation.status_message"])
  if (statusMessage !== undefined) details.status_message = statusMessage
  const usage = parsed(a["langfuse.observation.usage_details"])
  if (isRecord(usage)) {
    details.usage_details = usage
    set(into, "cachedInputTokens", cachedOf(usage))
  }
  const cost = parsed(a["langfuse.observation.cost_details"])
  if (isRecord(cost)) details.cost_details = cost
  if (Object.keys(details).length > 0) into.spanDetails = { ...into.spanDetails, langfuse: details }
}

/** Keys read here, kept out of the span's leftover `metadata.attributes`. */
export const isLangfuseKey = (key: string) =>
  key.startsWith("langfuse.trace.metadata") ||
  key.startsWith("langfuse.observation.metadata") ||
  key === "langfuse.release" ||
  key === "langfuse.version" ||
  key === "langfuse.observation.model.parameters" ||
  key === "langfuse.observation.prompt.name" ||
  key === "langfuse.observation.prompt.version" ||
  key === "langfuse.observation.completion_start_time" ||
  key === "langfuse.observation.level" ||
  key === "langfuse.observation.status_message" ||
  key === "langfuse.observation.usage_details" ||
  key === "langfuse.observation.cost_details"
