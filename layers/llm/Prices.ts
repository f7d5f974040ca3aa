import { readFileSync } from "node:fs"
import { ConfigError, Effect, Either, Option, ParseResult, Schema } from "effect"
import {
  costOf,
  DEFAULT_PRICES,
  PriceOverrides,
  priceOf,
  withEstimatedCost,
  withOverrides
} from "#src/domain/pricing/Prices"
import { AppConfig } from "../config/AppConfig.ts"

const describeIssues = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length === 0 ? "(root)" : issue.path.join(".")}: ${issue.message}`)
    .join("; ")

const decodeOverrides = Schema.decodeUnknownEither(Schema.parseJson(PriceOverrides))

const EXPECTED = `expected a JSON object {"<model>": {"input_per_mtok": number, "output_per_mtok": number}}`

/** TAPEDECK_MODEL_PRICES: invalid JSON or prices fail startup with an InvalidData ConfigError naming the variable and the problem. */
const decodeVariable = (json: string) =>
  Either.mapLeft(decodeOverrides(json), (e) =>
    ConfigError.InvalidData(["TAPEDECK_MODEL_PRICES"], `${EXPECTED}: ${describeIssues(e)}`)
  )

/**
 * TAPEDECK_MODEL_PRICES_FILE: the same JSON object as TAPEDECK_MODEL_PRICES, in a file (unreadable or invalid:
 * startup fails).
 */
const readPriceFile = (path: string) =>
  Effect.try({
    try: () => readFileSync(path, "utf8"),
    catch: (e) =>
      ConfigError.InvalidData(
        ["TAPEDECK_MODEL_PRICES_FILE"],
        `cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`
      )
  }).pipe(
    Effect.flatMap((json) =>
      Either.mapLeft(decodeOverrides(json), (e) =>
        ConfigError.InvalidData(["TAPEDECK_MODEL_PRICES_FILE"], `${path}: ${EXPECTED}: ${describeIssues(e)}`)
      )
    )
  )

/**
 * Model prices: the built-in defaults, then the file TAPEDECK_MODEL_PRICES_FILE names, then TAPEDECK_MODEL_PRICES,
 * each replacing or extending the one before; read once at startup.
 */
export class ModelPrices extends Effect.Service<ModelPrices>()("tapedeck/ModelPrices", {
  effect: Effect.gen(function* () {
    const config = yield* AppConfig
    const fromFile = Option.isSome(config.modelPricesFile)
      ? yield* readPriceFile(config.modelPricesFile.value)
      : undefined
    const overrides = Option.isSome(config.modelPrices)
      ? Option.some(yield* decodeVariable(config.modelPrices.value))
      : Option.none()
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
