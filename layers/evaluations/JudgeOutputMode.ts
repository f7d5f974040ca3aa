import type { LlmUnavailable } from "#src/domain/Errors"

/**
 * How the judge asks for structure, best first: a strict JSON schema, then any JSON object, then plain text
 * (the rubric prompt asks for the JSON object in words either way).
 */
export type OutputMode = "json_schema" | "json_object" | "text"

export const OUTPUT_MODES: ReadonlyArray<OutputMode> = ["json_schema", "json_object", "text"]

/**
 * The verdict's JSON schema for `response_format: json_schema` (strict). The 0..1 range is stated in the
 * description, not as `minimum`/`maximum`: several providers' strict subsets reject numeric constraints, and
 * such a refusal would cost the schema for nothing; the reader enforces the range.
 */
export const VERDICT_SCHEMA = {
  type: "object",
  properties: {
    score: {
      type: "number",
      description: "How well the execution satisfies the criterion, from 0 (not at all) to 1 (fully)"
    },
    reason: { type: "string", description: "One or two sentences on why" }
  },
  required: ["score", "reason"],
  additionalProperties: false
} as const

/** The `response_format` of a request in `mode`; undefined for plain text. */
export const responseFormatFor = (mode: OutputMode): unknown =>
  mode === "json_schema"
    ? { type: "json_schema", json_schema: { name: "judge_verdict", strict: true, schema: VERDICT_SCHEMA } }
    : mode === "json_object"
    ? { type: "json_object" }
    : undefined

/** The mode to try after `mode` was refused; undefined after plain text. */
export const nextMode = (mode: OutputMode): OutputMode | undefined => OUTPUT_MODES[OUTPUT_MODES.indexOf(mode) + 1]

/**
 * Whether the provider refused the requested structure rather than the request: a 400 (or 422, as some
 * gateways answer validation errors) whose message names response_format, json_schema or json_object.
 */
export const isStructureRefusal = (error: LlmUnavailable): boolean =>
  error.reason === "http_error" && (error.status === 400 || error.status === 422) &&
  /response[_ ]?format|json[_ ]?schema|json[_ ]?object|structured[_ ]output/i.test(error.message)

/** Most (base URL, model) pairs remembered; the model is caller-chosen text, so the memory is bounded. */
export const MAX_REMEMBERED_PROVIDERS = 1000

/**
 * What output mode each (base URL, model) accepted last, so later calls do not pay a refusal again. An
 * in-process cache: per instance, lost on restart (the first call after it pays the refusal once more), never a
 * source of truth. Oldest entries go first beyond MAX_REMEMBERED_PROVIDERS.
 */
export class OutputModeMemory {
  private readonly modes = new Map<string, OutputMode>()

  constructor(private readonly capacity = MAX_REMEMBERED_PROVIDERS) {}

  private static key(baseUrl: string | undefined, model: string) {
    return `${baseUrl ?? ""}\u0000${model}`
  }

  /** The mode to start with: the remembered one, else the best. */
  modeFor(baseUrl: string | undefined, model: string): OutputMode {
    return this.modes.get(OutputModeMemory.key(baseUrl, model)) ?? OUTPUT_MODES[0]!
  }

  remember(baseUrl: string | undefined, model: string, mode: OutputMode): void {
    const key = OutputModeMemory.key(baseUrl, model)
    this.modes.delete(key)
    this.modes.set(key, mode)
    if (this.modes.size > this.capacity) this.modes.delete(this.modes.keys().next().value!)
  }

  get size() {
    return this.modes.size
  }
}
