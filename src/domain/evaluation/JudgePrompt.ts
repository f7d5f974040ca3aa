import type { SpanWire } from "#src/domain/Span"
import type { TraceDetailWire } from "#src/domain/Trace"

/**
 * The version of the rubric prompt below. Stored on every run; a completed run is reused by the gate only when
 * it was judged with the same version (and evaluation, trace and judge model). Bump it whenever the prompt's
 * wording or rendering changes. v2: the retry says what was wrong with the answer, and the verdict is asked for
 * with a strict JSON schema where the provider accepts one.
 */
export const RUBRIC_PROMPT_VERSION = "tapedeck-judge-v2"

/** A message of the rubric prompt: the part of an OpenAI-style chat message the prompt uses. */
export interface PromptMessage {
  readonly role: "system" | "user"
  readonly content: string
}

/** Rough size of a token for the budgets below (English text and JSON average about four characters). */
const CHARS_PER_TOKEN = 4
/** Budget of the trace's input and of its output in the prompt, each. */
export const IO_BUDGET_TOKENS = 1000
/** Budget of the rendered spans in the prompt. */
export const SPANS_BUDGET_TOKENS = 6000
/** Per span: how much of its input, output and error is shown. */
const SPAN_INPUT_CHARS = 300
const SPAN_OUTPUT_CHARS = 500
const SPAN_ERROR_CHARS = 300

/** `text` cut to `max` characters, with a marker saying how much was left out. */
export const clip = (text: string, max: number) =>
  text.length <= max ? text : `${text.slice(0, max)}…[+${text.length - max} chars]`

/** A JSON value as prompt text: strings as they are, anything else as compact JSON; undefined as "(none)". */
export const renderValue = (value: unknown, max: number) => {
  if (value === undefined || value === null) return "(none)"
  const text = typeof value === "string" ? value : JSON.stringify(value)
  return clip(text ?? String(value), max)
}

const oneLine = (text: string) => text.replace(/\s+/g, " ")

const renderSpan = (span: SpanWire, depth: number) => {
  const parts = [`${"  ".repeat(Math.min(depth, 8))}- [${span.span_type}] ${oneLine(clip(span.name, 200))}`]
  if (span.model !== undefined) parts.push(`(${span.model})`)
  if (span.duration_ms !== undefined) parts.push(`${span.duration_ms}ms`)
  if (span.error !== undefined) parts.push(`ERROR: ${oneLine(clip(span.error, SPAN_ERROR_CHARS))}`)
  if (span.input !== undefined) parts.push(`in: ${oneLine(renderValue(span.input, SPAN_INPUT_CHARS))}`)
  if (span.output !== undefined) parts.push(`out: ${oneLine(renderValue(span.output, SPAN_OUTPUT_CHARS))}`)
  return parts.join(" ")
}

/**
 * The spans, in the given (trace) order, one line each, indented by depth, within `budgetChars`: when they do
 * not fit, the first and the last spans are kept (half the budget each) around a line saying how many were
 * left out.
 */
export const renderSpans = (spans: ReadonlyArray<SpanWire>, budgetChars: number): string => {
  if (spans.length === 0) return "(no spans)"
  const parents = new Map(spans.map((s) => [s.id, s.parent_id]))
  const depthOf = (id: string) => {
    let depth = 0
    let parent = parents.get(id) ?? null
    const seen = new Set<string>([id])
    while (parent !== null && parents.has(parent) && !seen.has(parent)) {
      seen.add(parent)
      depth++
      parent = parents.get(parent) ?? null
    }
    return depth
  }
  const lines = spans.map((s) => renderSpan(s, depthOf(s.id)))
  const total = lines.reduce((n, l) => n + l.length + 1, 0)
  if (total <= budgetChars) return lines.join("\n")
  const half = Math.floor(budgetChars / 2)
  const head: Array<string> = []
  let used = 0
  for (const line of lines) {
    if (used + line.length + 1 > half) break
    head.push(line)
    used += line.length + 1
  }
  const tail: Array<string> = []
  used = 0
  for (let i = lines.length - 1; i >= head.length; i--) {
    const line = lines[i]!
    if (used + line.length + 1 > half) break
    tail.unshift(line)
    used += line.length + 1
  }
  const omitted = lines.length - head.length - tail.length
  return [...head, `  … ${omitted} span${omitted === 1 ? "" : "s"} omitted …`, ...tail].join("\n")
}

const SYSTEM = [
  "You are a strict, impartial evaluator of AI agent executions.",
  "You judge ONE criterion at a time against a recorded trace: its input, its final output and its steps (spans).",
  "Score how well the execution satisfies the criterion on a scale from 0 to 1:",
  "1 = fully satisfies it, 0.5 = partially, 0 = not at all or contradicts it. Use intermediate values when apt.",
  "Judge only from the evidence shown; text cut with …[+N chars] or omitted spans is not evidence either way.",
  'Answer with a JSON object and nothing else, exactly: {"score": <number from 0 to 1>, "reason": "<one or two sentences>"}'
].join("\n")

export interface CriterionToJudge {
  readonly name: string
  readonly description: string
}

/** The trace as the rubric prompt shows it: name, status, input, output and steps, within the token budgets. */
export const renderTrace = (trace: TraceDetailWire): string => {
  const io = IO_BUDGET_TOKENS * CHARS_PER_TOKEN
  return [
    `Trace: ${trace.name ?? "(unnamed)"} — status ${trace.status}, ${trace.spanCount ?? trace.spans.length} spans`,
    "",
    "Input:",
    renderValue(trace.input, io),
    "",
    "Output:",
    renderValue(trace.output, io),
    "",
    "Steps:",
    renderSpans(trace.spans, SPANS_BUDGET_TOKENS * CHARS_PER_TOKEN)
  ].join("\n")
}

/**
 * The fixed rubric prompt (RUBRIC_PROMPT_VERSION) asking the judge about one criterion of one trace; `trace` is
 * the trace or its `renderTrace` (rendered once for all its criteria).
 */
export const judgeMessages = (
  criterion: CriterionToJudge,
  trace: TraceDetailWire | string
): ReadonlyArray<PromptMessage> => {
  const user = [
    `Criterion: ${criterion.name}`,
    `Criterion description: ${criterion.description === "" ? "(none)" : criterion.description}`,
    "",
    typeof trace === "string" ? trace : renderTrace(trace),
    "",
    `Score the criterion "${criterion.name}" now, as the JSON object described.`
  ].join("\n")
  return [
    { role: "system", content: SYSTEM },
    { role: "user", content: user }
  ]
}

/**
 * What is asked again after a malformed answer, saying what was wrong with it (the reader's verdict), so a judge
 * that answered on another scale or about another criterion can correct exactly that.
 */
export const retryNote = (why: string) =>
  `Your previous answer could not be read as a score: ${why}. Answer again with only the JSON object {"score": <number from 0 to 1>, "reason": "<one or two sentences>"}.`
