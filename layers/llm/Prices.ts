import { readFileSync } from "node:fs"
import { ConfigError, Effect, Either, Option, ParseResult, Schema } from "effect"
import { MAX_AMOUNT } from "#src/domain/Json"
import { AppConfig } from "../config/AppConfig.ts"

/** The price of one model in USD per million tokens. */
export interface ModelPrice {
  readonly inputPerMtok: number
  readonly outputPerMtok: number
}

/** Prices by model id. */
export type PriceTable = ReadonlyMap<string, ModelPrice>

const price = (inputPerMtok: number, outputPerMtok: number): ModelPrice => ({ inputPerMtok, outputPerMtok })

/**
 * List prices of common models (standard tier, no caching or batch discounts; Gemini Pro at the short-prompt
 * tier). Providers change them: override with TAPEDECK_MODEL_PRICES rather than trusting these for billing.
 */
export const DEFAULT_PRICES: PriceTable = new Map([
  ["gpt-4o", price(2.5, 10)],
  ["gpt-4o-mini", price(0.15, 0.6)],
  ["gpt-4.1", price(2, 8)],
  ["gpt-4.1-mini", price(0.4, 1.6)],
  ["gpt-4.1-nano", price(0.1, 0.4)],
  ["gpt-4-turbo", price(10, 30)],
  ["gpt-3.5-turbo", price(0.5, 1.5)],
  ["o1", price(15, 60)],
  ["o1-mini", price(1.1, 4.4)],
  ["o3", price(2, 8)],
  ["o3-mini", price(1.1, 4.4)],
  ["o4-mini", price(1.1, 4.4)],
  ["claude-3-5-sonnet", price(3, 15)],
  ["claude-3-7-sonnet", price(3, 15)],
  ["claude-sonnet-4", price(3, 15)],
  ["claude-3-5-haiku", price(0.8, 4)],
  ["claude-3-haiku", price(0.25, 1.25)],
  ["claude-3-opus", price(15, 75)],
  ["claude-opus-4", price(15, 75)],
  ["gemini-1.5-pro", price(1.25, 5)],
  ["gemini-1.5-flash", price(0.075, 0.3)],
  ["gemini-1.5-flash-8b", price(0.0375, 0.15)],
  ["gemini-2.0-flash", price(0.1, 0.4)],
  ["gemini-2.5-pro", price(1.25, 10)],
  ["gemini-2.5-flash", price(0.3, 2.5)]
])

/**
 * Other names of listed models, which neither a prefix nor a `vendor/` prefix reaches: dotted versions, `-latest`
 * and ChatGPT aliases, Bedrock and Vertex spellings. Looked up after the exact id and before prefixes.
 */
export const MODEL_ALIASES: ReadonlyMap<string, string> = new Map([
  ["chatgpt-4o-latest", "gpt-4o"],
  ["gpt-4o-latest", "gpt-4o"],
  ["claude-3.5-sonnet", "claude-3-5-sonnet"],
  ["claude-3.7-sonnet", "claude-3-7-sonnet"],
  ["claude-3.5-haiku", "claude-3-5-haiku"],
  ["claude-sonnet-4-0", "claude-sonnet-4"],
  ["claude-opus-4-0", "claude-opus-4"]
])

/** Cloud prefixes in front of a model id: `anthropic.claude-3-5-sonnet-20241022-v2:0` (Bedrock), `us.anthropic.…`. */
const CLOUD_PREFIX = /^(?:(?:us|eu|apac|global)\.)?(?:anthropic|openai|meta|mistral|amazon|google|cohere)\./

/** Characters that end a model family's name inside a longer id: `gpt-4o-2024-08-06`, `claude-3-5-haiku@20241022`. */
const SEPARATORS = new Set(["-", ":", "@", "_"])

const longestPrefixMatch = (table: PriceTable, model: string): ModelPrice | undefined => {
  let best: { readonly length: number; readonly price: ModelPrice } | undefined
  for (const [id, entry] of table) {
    // A prefix must end at a separator: "gpt-4" must not price "gpt-4o", nor "o1" price "o1x".
    if (model.startsWith(id) && SEPARATORS.has(model.charAt(id.length)) && id.length > (best?.length ?? 0)) {
      best = { length: id.length, price: entry }
    }
  }
  return best?.price
}

/**
 * The price of a model: its exact id, else the longest listed id it extends (dated variants such as
 * `gpt-4o-2024-08-06`), else the same without a router's `vendor/` prefix (`openai/gpt-4o`). Case-insensitive.
 */
export const priceOf = (table: PriceTable, model: string): ModelPrice | undefined => {
  const id = model.trim().toLowerCase()
  const alias = MODEL_ALIASES.get(id)
  const found = table.get(id) ?? (alias === undefined ? undefined : table.get(alias)) ?? longestPrefixMatch(table, id)
  if (found !== undefined) return found
  const slash = id.lastIndexOf("/")
  if (slash >= 0) return priceOf(table, id.slice(slash + 1))
  const cloud = CLOUD_PREFIX.exec(id)
  return cloud !== null ? priceOf(table, id.slice(cloud[0].length)) : undefined
}

/** The cost in USD of a call, or undefined for a model the table does not know. */
export const costOf = (
  table: PriceTable,
  model: string,
  inputTokens: number,
  outputTokens: number
): number | undefined => {
  const entry = priceOf(table, model)
  if (entry === undefined) return undefined
  // Rounded to 1e-12 USD, which removes float noise from decimal prices (0.0005253, not 0.0005252999999999999).
  const microUsd = inputTokens * entry.inputPerMtok + outputTokens * entry.outputPerMtok
  return Math.round(microUsd * 1e6) / 1e12
}

/** The additional span field that marks a cost Tapedeck estimated from its price table. */
export const COST_ESTIMATED = "cost_estimated"

/**
 * The cost a span gets when it was sent without one: its model's price times its tokens, for a span that names a
 * model the table knows and counts some tokens; undefined otherwise (a sent cost is never replaced: callers
 * only ask for spans without one).
 */
export const estimatedCost = (
  table: PriceTable,
  span: { readonly model?: string | undefined; readonly input_tokens?: number | undefined; readonly output_tokens?: number | undefined }
): number | undefined => {
  if (span.model === undefined || span.model === "") return undefined
  const input = span.input_tokens ?? 0
  const output = span.output_tokens ?? 0
  if (input + output <= 0) return undefined
  const cost = costOf(table, span.model, input, output)
  return cost === undefined ? undefined : Math.min(cost, MAX_AMOUNT)
}

/**
 * A span as stored: without a cost, it gets the estimate and `cost_estimated: true` (an additional field, returned
 * with the span); with a cost, or none to estimate, it is returned as it came.
 */
export const withEstimatedCost = <S extends {
  readonly model?: string | undefined
  readonly input_tokens?: number | undefined
  readonly output_tokens?: number | undefined
  readonly cost?: number | undefined
}>(table: PriceTable, span: S): S => {
  if (span.cost !== undefined) return span
  const cost = estimatedCost(table, span)
  return cost === undefined ? span : { ...span, cost, [COST_ESTIMATED]: true }
}

const PerMtok = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

/** `TAPEDECK_MODEL_PRICES`: `{ "<model>": { "input_per_mtok": number, "output_per_mtok": number } }`. */
export const PriceOverrides = Schema.Record({
  key: Schema.String.pipe(Schema.minLength(1)),
  value: Schema.Struct({ input_per_mtok: PerMtok, output_per_mtok: PerMtok })
})

const describeIssues = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length === 0 ? "(root)" : issue.path.join(".")}: ${issue.message}`)
    .join("; ")

const decodeOverrides = Schema.decodeUnknownEither(Schema.parseJson(PriceOverrides))

/** The table with the overrides applied: same ids (case-insensitively) replace, new ones extend. */
export const withOverrides = (table: PriceTable, overrides: typeof PriceOverrides.Type): PriceTable =>
  new Map([
    ...table,
    ...Object.entries(overrides).map(([model, p]) =>
      [model.trim().toLowerCase(), price(p.input_per_mtok, p.output_per_mtok)] as const
    )
  ])

/** TAPEDECK_MODEL_PRICES: invalid JSON or prices fail startup with an InvalidData ConfigError naming the variable and the problem. */
const decodeVariable = (json: string) =>
  Either.mapLeft(decodeOverrides(json), (e) =>
    ConfigError.InvalidData(
      ["TAPEDECK_MODEL_PRICES"],
      `expected a JSON object {"<model>": {"input_per_mtok": number, "output_per_mtok": number}}: ${describeIssues(e)}`
    ))

/** TAPEDECK_MODEL_PRICES_FILE: the same JSON object as TAPEDECK_MODEL_PRICES, in a file (unreadable or invalid: startup fails). */
const readPriceFile = (path: string) =>
  Effect.try({
    try: () => readFileSync(path, "utf8"),
    catch: (e) => ConfigError.InvalidData(["TAPEDECK_MODEL_PRICES_FILE"], `cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }).pipe(
    Effect.flatMap((json) =>
      Either.mapLeft(decodeOverrides(json), (e) =>
        ConfigError.InvalidData(
          ["TAPEDECK_MODEL_PRICES_FILE"],
          `${path}: expected a JSON object {"<model>": {"input_per_mtok": number, "output_per_mtok": number}}: ${describeIssues(e)}`
        ))
    )
  )

/**
 * Model prices: the built-in defaults, then the file TAPEDECK_MODEL_PRICES_FILE names, then TAPEDECK_MODEL_PRICES,
 * each replacing or extending the one before; read once at startup.
 */
export class ModelPrices extends Effect.Service<ModelPrices>()("tapedeck/ModelPrices", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const fromFile = Option.isSome(config.modelPricesFile) ? yield* readPriceFile(config.modelPricesFile.value) : undefined
    const overrides = Option.isSome(config.modelPrices) ? Option.some(yield* decodeVariable(config.modelPrices.value)) : Option.none()
    const base = fromFile === undefined ? DEFAULT_PRICES : withOverrides(DEFAULT_PRICES, fromFile)
    const table = Option.match(overrides, {
      onNone: () => base,
      onSome: (o) => withOverrides(base, o)
    })
    // Plain functions, not Effect.fn: a map lookup needs neither a span nor an error channel.
    return {
      table,
      priceOf: (model: string) => priceOf(table, model),
      costOf: (model: string, inputTokens: number, outputTokens: number) =>
        costOf(table, model, inputTokens, outputTokens),
      withEstimatedCost: <S extends Parameters<typeof withEstimatedCost>[1]>(span: S) => withEstimatedCost(table, span)
    } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
