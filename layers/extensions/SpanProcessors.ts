import { Cause, Context, Effect, Option } from "effect"
import { SpanProcessorFailed } from "#src/domain/Errors"
import type { AccountId } from "#src/domain/Ids"

/** A span as JSON, as every write path hands it to processors: the API's field names, ISO 8601 times. */
export type ProcessedSpan = {
  readonly id: string
  readonly parent_id?: string | null | undefined
  readonly name: string
  readonly span_type: string
  readonly started_at: string
  readonly input?: unknown
  readonly output?: unknown
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
  readonly [field: string]: unknown
}

/** Where a span came from, for processors that treat paths differently. */
export interface SpanContext {
  readonly accountId: AccountId
  readonly traceId: string
  /** "rest": the traces and spans routes, batches and the SDK; "otlp": OTLP/HTTP and OTLP/gRPC exports. */
  readonly path: "rest" | "otlp"
}

/**
 * An extension that sees every ingested span before it is stored: returns it (rewritten or not) or `Option.none()`
 * to drop it. Any failure refuses the whole request (SpanProcessorFailed), so nothing unprocessed is stored.
 */
export interface SpanProcessor {
  readonly name: string
  readonly process: (span: ProcessedSpan, context: SpanContext) => Effect.Effect<Option.Option<ProcessedSpan>, unknown>
}

/** The installed processors, run in order; none by default (the write paths then skip this step). */
export class SpanProcessors extends Context.Reference<SpanProcessors>()("tapedeck/SpanProcessors", {
  defaultValue: (): ReadonlyArray<SpanProcessor> => []
}) {}

/**
 * Runs the processors over a batch of one trace's spans, in order. A dropped span's children take its parent, so
 * the batch stays a tree. A processor's failure, defect, or a result without an id, name or start is a failure.
 */
export const processSpans = <S extends ProcessedSpan>(
  processors: ReadonlyArray<SpanProcessor>,
  spans: ReadonlyArray<S>,
  context: SpanContext
): Effect.Effect<ReadonlyArray<S>, SpanProcessorFailed> =>
  Effect.gen(function* () {
    let current: ReadonlyArray<S> = spans
    for (const processor of processors) {
      const kept: Array<S> = []
      const dropped = new Map<string, string | null | undefined>()
      for (const span of current) {
        const result = yield* processor
          .process(span, context)
          .pipe(
            Effect.catchAllCause((cause) =>
              Effect.fail(new SpanProcessorFailed({ processor: processor.name, reason: reasonOf(cause) }))
            )
          )
        if (Option.isNone(result)) {
          dropped.set(span.id, span.parent_id)
          continue
        }
        const next = result.value
        if (typeof next?.id !== "string" || typeof next.name !== "string" || typeof next.started_at !== "string") {
          return yield* new SpanProcessorFailed({
            processor: processor.name,
            reason: "it returned a span without id, name or started_at"
          })
        }
        if (next.id !== span.id) {
          return yield* new SpanProcessorFailed({ processor: processor.name, reason: "it changed a span's id" })
        }
        kept.push(next as S)
      }
      current = dropped.size === 0 ? kept : kept.map((s) => reparented(s, dropped))
    }
    return current
  })

const reparented = <S extends ProcessedSpan>(span: S, dropped: ReadonlyMap<string, string | null | undefined>): S => {
  let parent = span.parent_id
  while (typeof parent === "string" && dropped.has(parent)) parent = dropped.get(parent)
  return parent === span.parent_id ? span : { ...span, parent_id: parent ?? null }
}

const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const failure = [...Cause.failures(cause), ...Cause.defects(cause)][0]
  if (failure instanceof Error) return failure.message
  if (typeof failure === "object" && failure !== null && "message" in failure) return String(failure.message)
  if (Cause.isInterruptedOnly(cause)) return "interrupted"
  return String(failure)
}
