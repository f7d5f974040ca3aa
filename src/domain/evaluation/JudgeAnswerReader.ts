/**
 * The tolerant reader of a judge's answer: lenient about the form real models answer in (code fences, prose
 * around the object, extra keys, other key names, a score as a numeric string, a tool call, a per-criterion
 * list), strict about the content (a finite score in the declared scale, for the criterion asked). Pure, so the
 * answer corpus (test/fixtures/judge-answers) and property tests can hold it to the rules below.
 *
 * Rules, in order:
 * 1. `<think>…</think>` blocks (reasoning models) are dropped.
 * 2. Candidates are the arguments of each tool call, then every complete JSON object (or array) in the text, in
 *    order; the first candidate that reads as an answer wins. A balanced `{…}` that is not JSON is skipped whole;
 *    an unbalanced one (a cut answer) ends the search, so nothing inside a broken object is read.
 * 3. In an object, a per-criterion list (LIST_KEYS, an array of entries naming their criterion or an object keyed
 *    by criterion) is used when it names the criterion asked; otherwise the object's own score is used; an object
 *    with neither is looked into through WRAPPER_KEYS (`{"evaluation": {…}}`).
 * 4. The score is the first of SCORE_ALIASES present, a number or a numeric string ("0.8", "8/10", "4 out of 5",
 *    "85%"). It is rescaled to 0..1 only from a declared scale: one in the string itself, a scale the object
 *    declares (`scale`: "1-10" or [1, 10] or {min, max}; MAX_KEYS: a maximum with 0 as minimum), or the scale
 *    the prompt declared (0..1 for the rubric prompt). A score outside its scale is malformed; nothing is guessed.
 * 5. The reason is the first of REASON_ALIASES present (of the entry, else of the object holding the list).
 * Keys are compared without case, `_`, `-` or spaces, so `overallScore` is `overall_score`. Extra keys are ignored.
 */
import { Either } from "effect"
import { clip } from "./JudgePrompt.ts"

/** A closed range of scores, as declared by the prompt or the answer. */
export interface Scale {
  readonly min: number
  readonly max: number
}

/** The scale the rubric prompt asks for. */
export const UNIT_SCALE: Scale = { min: 0, max: 1 }

/** Key names accepted for the score, in order of preference. */
export const SCORE_ALIASES = [
  "score",
  "overall_score",
  "final_score",
  "total_score",
  "rating",
  "overall_rating"
] as const
/** Key names accepted for the reason, in order of preference. */
export const REASON_ALIASES = ["reason", "reasoning", "explanation", "rationale", "justification"] as const
/** Keys of a per-criterion list. */
export const LIST_KEYS = [
  "criteria",
  "scores",
  "results",
  "evaluations",
  "criterion_scores",
  "per_criterion",
  "ratings"
] as const
/** Keys an entry of a per-criterion list names its criterion with. */
export const ENTRY_NAME_KEYS = ["name", "criterion", "criterion_name"] as const
/** Keys of an object wrapped around the answer. */
export const WRAPPER_KEYS = [
  "result",
  "evaluation",
  "judgment",
  "judgement",
  "assessment",
  "verdict",
  "output",
  "response",
  "answer"
] as const
/** Keys declaring the top of a 0-based scale (`{"score": 7, "out_of": 10}`). */
export const MAX_KEYS = ["max_score", "out_of", "max", "scale_max", "max_rating"] as const

/** The longest reason kept. */
export const MAX_REASON_CHARS = 2000
/** How much of the answer a malformed verdict quotes. */
export const QUOTED_ANSWER_CHARS = 300
/** How deep wrappers are followed. */
const MAX_WRAPPER_DEPTH = 3

export interface JudgeAnswer {
  readonly score: number
  readonly reason: string
}

/** What the judge sent back: the message content and the tool calls, as the provider gave them. */
export interface RawJudgeAnswer {
  readonly content: string | null
  readonly toolCalls?: unknown
}

export interface ReadOptions {
  /** The criterion the prompt asked about; selects the entry of a per-criterion list. */
  readonly criterion: string
  /** The scale the prompt declared; UNIT_SCALE when absent. */
  readonly scale?: Scale
}

const normKey = (key: string) => key.toLowerCase().replace(/[\s_-]/g, "")
const normName = (name: string) => name.trim().toLowerCase().replace(/\s+/g, " ")

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [k: string]: Json }
type JsonObject = { readonly [k: string]: Json }

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v)

/** The value of the first of `aliases` present in `obj` (keys compared normalised), with which alias. */
const pick = (
  obj: JsonObject,
  aliases: ReadonlyArray<string>
): { readonly key: string; readonly value: Json } | undefined => {
  const byNorm = new Map<string, string>()
  for (const key of Object.keys(obj)) {
    const n = normKey(key)
    if (!byNorm.has(n)) byNorm.set(n, key)
  }
  for (const alias of aliases) {
    const key = byNorm.get(normKey(alias))
    if (key !== undefined) return { key, value: obj[key]! }
  }
  return undefined
}

const NUMBER = String.raw`[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?`
const PLAIN = new RegExp(`^${NUMBER}$`)
const FRACTION = new RegExp(`^(${NUMBER})\\s*(?:/|out of)\\s*(${NUMBER})$`, "i")
const PERCENT = new RegExp(`^(${NUMBER})\\s*%$`)
const RANGE = new RegExp(`^\\s*(${NUMBER})\\s*(?:-|–|—|to|\\.\\.)\\s*(${NUMBER})\\s*$`, "i")

/** A scale the object declares, if it declares a usable one. */
const declaredScale = (obj: JsonObject): Scale | undefined => {
  const scale = pick(obj, ["scale", "score_range", "range"])
  if (scale !== undefined) {
    const v = scale.value
    if (typeof v === "string") {
      const m = RANGE.exec(v)
      if (m) return { min: Number(m[1]), max: Number(m[2]) }
    } else if (Array.isArray(v) && v.length === 2 && v.every((n) => typeof n === "number")) {
      return { min: v[0] as number, max: v[1] as number }
    } else if (isObject(v) && typeof v.min === "number" && typeof v.max === "number") {
      return { min: v.min, max: v.max }
    }
  }
  const max = pick(obj, MAX_KEYS)
  if (max !== undefined) {
    const n =
      typeof max.value === "number"
        ? max.value
        : typeof max.value === "string" && PLAIN.test(max.value.trim())
          ? Number(max.value)
          : NaN
    if (Number.isFinite(n)) return { min: 0, max: n }
  }
  return undefined
}

const fmtScale = (s: Scale) => `${s.min}..${s.max}`

/** The score in 0..1, or why it is not one. `objectScale` and `promptScale` apply when the value declares none. */
const readScore = (value: Json, objectScale: Scale | undefined, promptScale: Scale): Either.Either<number, string> => {
  let raw: number
  let scale: Scale | undefined
  if (typeof value === "number") {
    raw = value
  } else if (typeof value === "string") {
    const text = value.trim()
    const fraction = FRACTION.exec(text)
    const percent = PERCENT.exec(text)
    if (PLAIN.test(text)) raw = Number(text)
    else if (fraction) {
      raw = Number(fraction[1])
      scale = { min: 0, max: Number(fraction[2]) }
    } else if (percent) {
      raw = Number(percent[1])
      scale = { min: 0, max: 100 }
    } else return Either.left(`the score ${clip(JSON.stringify(value), 60)} is not a number`)
  } else {
    return Either.left(`the score ${clip(JSON.stringify(value), 60)} is not a number`)
  }
  if (!Number.isFinite(raw)) return Either.left(`the score ${clip(JSON.stringify(value), 60)} is not a finite number`)
  const declared = scale ?? objectScale
  const used = declared ?? promptScale
  if (!(Number.isFinite(used.min) && Number.isFinite(used.max) && used.min < used.max)) {
    return Either.left(`the declared scale ${fmtScale(used)} is not a usable range`)
  }
  if (raw < used.min || raw > used.max) {
    return Either.left(
      declared === undefined
        ? `the score ${raw} is outside ${fmtScale(used)} and the answer declares no scale`
        : `the score ${raw} is outside its declared scale ${fmtScale(used)}`
    )
  }
  return Either.right(Math.round(((raw - used.min) / (used.max - used.min)) * 1e12) / 1e12)
}

const readReason = (...sources: ReadonlyArray<JsonObject>): string => {
  for (const source of sources) {
    const found = pick(source, REASON_ALIASES)
    if (found === undefined || found.value === null) continue
    const v = found.value
    const text =
      typeof v === "string"
        ? v
        : Array.isArray(v) && v.every((x) => typeof x === "string")
          ? v.join("; ")
          : JSON.stringify(v)
    return clip(text.trim(), MAX_REASON_CHARS)
  }
  return "(the judge gave no reason)"
}

/** The entry of a per-criterion list (array or object keyed by criterion) that names `criterion`. */
const entryFor = (list: Json, criterion: string): { readonly entry: Json } | undefined => {
  const wanted = normName(criterion)
  if (Array.isArray(list)) {
    for (const entry of list) {
      if (!isObject(entry)) continue
      const name = pick(entry, ENTRY_NAME_KEYS)
      if (name !== undefined && typeof name.value === "string" && normName(name.value) === wanted) return { entry }
    }
    return undefined
  }
  if (isObject(list)) {
    for (const key of Object.keys(list)) if (normName(key) === wanted) return { entry: list[key]! }
  }
  return undefined
}

type Reading = Either.Either<JudgeAnswer, string>

const readEntry = (entry: Json, holder: JsonObject, promptScale: Scale): Reading => {
  if (isObject(entry)) {
    const score = pick(entry, SCORE_ALIASES)
    if (score === undefined) return Either.left("the entry for the criterion has no score")
    return readScore(score.value, declaredScale(entry) ?? declaredScale(holder), promptScale).pipe(
      Either.map((s) => ({ score: s, reason: readReason(entry, holder) }))
    )
  }
  return readScore(entry, declaredScale(holder), promptScale).pipe(
    Either.map((s) => ({ score: s, reason: readReason(holder) }))
  )
}

const readObject = (obj: JsonObject, options: ReadOptions, promptScale: Scale, depth: number): Reading => {
  const list = pick(obj, LIST_KEYS)
  if (list !== undefined) {
    const named = entryFor(list.value, options.criterion)
    if (named !== undefined) return readEntry(named.entry, obj, promptScale)
  }
  const score = pick(obj, SCORE_ALIASES)
  if (score !== undefined) {
    return readScore(score.value, declaredScale(obj), promptScale).pipe(
      Either.map((s) => ({ score: s, reason: readReason(obj) }))
    )
  }
  if (depth < MAX_WRAPPER_DEPTH) {
    const wrapped = pick(obj, WRAPPER_KEYS)
    if (wrapped !== undefined && (isObject(wrapped.value) || Array.isArray(wrapped.value))) {
      return readValue(wrapped.value, options, promptScale, depth + 1)
    }
  }
  return Either.left(
    list !== undefined
      ? `the per-criterion list does not name the criterion "${options.criterion}" and there is no overall score`
      : `no score (expected one of ${SCORE_ALIASES.join(", ")})`
  )
}

/** A parsed JSON value: an object, or an array read as a per-criterion list or a list of answers. */
const readValue = (value: Json, options: ReadOptions, promptScale: Scale, depth: number): Reading => {
  if (isObject(value)) return readObject(value, options, promptScale, depth)
  if (Array.isArray(value)) {
    const named = entryFor(value, options.criterion)
    if (named !== undefined) return readEntry(named.entry, {}, promptScale)
    const anyNamed = value.some((e) => isObject(e) && pick(e, ENTRY_NAME_KEYS) !== undefined)
    if (anyNamed) return Either.left(`the per-criterion list does not name the criterion "${options.criterion}"`)
    let first: Reading | undefined
    for (const item of value) {
      if (!isObject(item)) continue
      const read = readObject(item, options, promptScale, depth)
      if (Either.isRight(read)) return read
      first ??= read
    }
    return first ?? Either.left("the JSON array holds no object")
  }
  return Either.left("the JSON value is not an object")
}

/**
 * The complete JSON values in `text` that start with `{` or `[`, in order. A balanced span that is not JSON is
 * skipped whole (its insides are not read on their own); an unbalanced one ends the scan. Each character is
 * visited a bounded number of times, so a huge or hostile answer costs linear time.
 */
export const jsonValuesIn = (text: string): Array<Json> => {
  const values: Array<Json> = []
  let i = 0
  while (i < text.length) {
    const ch = text[i]
    if (ch !== "{" && ch !== "[") {
      i++
      continue
    }
    const end = balancedEnd(text, i)
    if (end === undefined) break
    try {
      values.push(JSON.parse(text.slice(i, end + 1)) as Json)
      i = end + 1
    } catch {
      // Skipped whole, `[` as well as `{`: the scan stays linear in the answer's length, whatever a provider sends.
      i = end + 1
    }
  }
  return values
}

/** The index closing the bracket at `start`, minding JSON strings; undefined when it never closes. */
const balancedEnd = (text: string, start: number): number | undefined => {
  const stack: Array<string> = []
  let inString = false
  for (let i = start; i < text.length; i++) {
    const ch = text[i]
    if (inString) {
      if (ch === "\\") i++
      else if (ch === '"') inString = false
      continue
    }
    if (ch === '"') inString = true
    else if (ch === "{") stack.push("}")
    else if (ch === "[") stack.push("]")
    else if (ch === "}" || ch === "]") {
      if (stack.pop() !== ch) return i
      if (stack.length === 0) return i
    }
  }
  return undefined
}

const stripThinking = (text: string) => text.replace(/<think>[\s\S]*?(<\/think>|$)/gi, "")

/** The `function.arguments` of each tool call, parsed when given as a JSON string. */
type ToolArguments = { readonly value?: Json; readonly text?: string }
const toolArguments = (toolCalls: unknown): Array<ToolArguments> => {
  if (!Array.isArray(toolCalls)) return []
  return toolCalls.flatMap((call): Array<ToolArguments> => {
    const args = isObject(call) && isObject(call.function) ? call.function.arguments : undefined
    if (typeof args === "string") return [{ text: args }]
    if (isObject(args)) return [{ value: args }]
    return []
  })
}

/**
 * The judge's verdict read from its answer by the rules at the top of this module; Left: why it is malformed,
 * quoting the answer (clipped).
 */
export const readJudgeAnswer = (answer: RawJudgeAnswer, options: ReadOptions): Either.Either<JudgeAnswer, string> => {
  const promptScale = options.scale ?? UNIT_SCALE
  const candidates: Array<Json> = []
  for (const args of toolArguments(answer.toolCalls)) {
    if (args.value !== undefined) candidates.push(args.value)
    else candidates.push(...jsonValuesIn(args.text ?? ""))
  }
  const content = answer.content ?? ""
  candidates.push(...jsonValuesIn(stripThinking(content)))
  let firstWhy: string | undefined
  for (const candidate of candidates) {
    const read = readValue(candidate, options, promptScale, 0)
    if (Either.isRight(read)) return read
    firstWhy ??= read.left
  }
  const quoted = content.trim() !== "" ? content.trim() : candidates.length > 0 ? JSON.stringify(candidates[0]) : ""
  if (quoted === "") return Either.left("the judge answered nothing")
  const why = firstWhy ?? "no JSON object in the answer"
  return Either.left(`${why}; the judge answered: ${clip(quoted.replace(/\s+/g, " "), QUOTED_ANSWER_CHARS)}`)
}
