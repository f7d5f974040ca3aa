import { MAX_AMOUNT } from "#src/domain/Json"
import type { SpanType } from "#src/domain/Span"
import {
  CACHE_READ_KEYS,
  CACHE_WRITE_KEYS,
  COST_KEYS,
  INPUT_TOKEN_KEYS,
  OUTPUT_TOKEN_KEYS,
  REASONING_KEYS,
  TOTAL_KEYS
} from "./AttributeKeys.ts"
import { type Attrs, asAmount, asCount, firstCount, isBlank, parseStructured } from "./Attributes.ts"
import { type Facts, isAggregate } from "./SpanKinds.ts"
import { type Json, isRecord, put } from "./TextCleaning.ts"
import type { ConventionReading } from "./conventions/Conventions.ts"

/** Tokens and cost (docs/otel-mapping.md, "Usage and cost"). */

const costOf = (a: Attrs): number | undefined => {
  const details = parseStructured(a["langfuse.observation.cost_details"])
  if (isRecord(details)) {
    const total = asAmount(details.total)
    if (total !== undefined) return total
    let sum: number | undefined
    for (const key in details) {
      const n = asAmount(details[key])
      if (n !== undefined) sum = (sum ?? 0) + n
    }
    if (sum !== undefined) return Math.min(sum, MAX_AMOUNT)
  }
  for (const key of COST_KEYS) {
    const n = asAmount(a[key])
    if (n !== undefined) return n
  }
  const prompt = asAmount(a["llm.cost.prompt"])
  const completion = asAmount(a["llm.cost.completion"])
  return prompt === undefined && completion === undefined
    ? undefined
    : Math.min((prompt ?? 0) + (completion ?? 0), MAX_AMOUNT)
}

/**
 * Input and output tokens in a Langfuse usage_details object: its own keys (`input`, `output`), else the provider's
 * usage object passed through as the SDK integrations do (Langfuse Python's OpenAI integration sends OpenAI's
 * `prompt_tokens` / `completion_tokens`; the JS SDK's OpenAiUsage type is `promptTokens` / `completionTokens`;
 * Anthropic and the Responses API say `input_tokens` / `output_tokens`).
 */
const DETAIL_INPUT = ["input", "prompt_tokens", "promptTokens", "input_tokens"]
const DETAIL_OUTPUT = ["output", "completion_tokens", "completionTokens", "output_tokens"]
const firstDetail = (details: Record<string, unknown>, keys: ReadonlyArray<string>) => {
  for (const key of keys) {
    const n = asCount(details[key])
    if (n !== undefined) return n
  }
  return undefined
}

/** A span's tokens and cost as sent; an aggregate span keeps them in metadata only ("Aggregate usage"). */
export interface SpanUsage {
  readonly aggregate: boolean
  readonly inputTokens: number | undefined
  readonly outputTokens: number | undefined
  readonly cost: number | undefined
}

export const usageOf = (f: Facts, type: SpanType): SpanUsage => {
  const a = f.a
  const usageDetails = parseStructured(a["langfuse.observation.usage_details"])
  const details = isRecord(usageDetails) ? usageDetails : undefined
  return {
    aggregate: isAggregate(f, type),
    inputTokens:
      firstCount(a, INPUT_TOKEN_KEYS) ?? (details !== undefined ? firstDetail(details, DETAIL_INPUT) : undefined),
    outputTokens:
      firstCount(a, OUTPUT_TOKEN_KEYS) ?? (details !== undefined ? firstDetail(details, DETAIL_OUTPUT) : undefined),
    cost: costOf(a)
  }
}

/** `metadata.gen_ai.usage`: the token details beyond input and output. */
export const usageMetadata = (a: Attrs, conv: ConventionReading): Json => {
  const usage: Json = {}
  put(usage, "cache_read_input_tokens", firstCount(a, CACHE_READ_KEYS) ?? conv.cachedInputTokens)
  put(usage, "cache_creation_input_tokens", firstCount(a, CACHE_WRITE_KEYS))
  put(usage, "reasoning_output_tokens", firstCount(a, REASONING_KEYS))
  put(usage, "total_tokens", firstCount(a, TOTAL_KEYS))
  return usage
}

/** `metadata.aggregate_usage`, which finalize promotes when no child has any usage. */
export const putAggregateUsage = (meta: Json, a: Attrs, usage: SpanUsage) => {
  const totals: Json = {}
  put(totals, "input_tokens", asCount(a["gen_ai.aggregated_usage.input_tokens"]) ?? usage.inputTokens)
  put(totals, "output_tokens", asCount(a["gen_ai.aggregated_usage.output_tokens"]) ?? usage.outputTokens)
  put(totals, "cost", asAmount(a["gen_ai.aggregated_usage.cost"]) ?? usage.cost)
  if (!isBlank(totals)) meta.aggregate_usage = totals
}
