import { Effect, Option, Schema } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/** Every ingestion permit is taken: the caller should retry later (503 with Retry-After). */
export class IngestSaturated extends Schema.TaggedError<IngestSaturated>()("IngestSaturated", {
  maxInflight: Schema.Number
}) {}

/**
 * Bounds concurrent OTLP requests per instance (TAPEDECK_INGEST_MAX_INFLIGHT). A request over the bound is
 * refused at once, before its body is read, so overload costs no memory and no database work.
 */
export class IngestGate extends Effect.Service<IngestGate>()("tapedeck/IngestGate", {
  effect: Effect.gen(function*() {
    const { ingestMaxInflight } = yield* AppConfig
    const permits = yield* Effect.makeSemaphore(ingestMaxInflight)

    const guard = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | IngestSaturated, R> =>
      permits.withPermitsIfAvailable(1)(effect).pipe(
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(new IngestSaturated({ maxInflight: ingestMaxInflight })),
          onSome: Effect.succeed
        }))
      )

    return { guard } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
