import { Cause, Context, Effect, Exit, Option, Schema } from "effect"
import { SpanProcessorFailed } from "#src/domain/Errors"
import type { AccountId } from "#src/domain/Ids"
import { Span, spanWireOf } from "#src/domain/Span"
import { decodeRewrittenSpan, rewrittenSpanJson } from "#src/domain/SpanDecoding"

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
        const effect = processor.process(span, context)
        // An answer already at hand (`Effect.succeed`, what a synchronous processor returns) is taken as it is,
        // without running an effect for each span.
        const result: Option.Option<ProcessedSpan> =
          Exit.isExit(effect) && Exit.isSuccess(effect)
            ? (effect.value as Option.Option<ProcessedSpan>)
            : yield* effect.pipe(
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

const decodeSpan = Schema.decodeUnknown(Span)

/**
 * `processSpans` over decoded spans (the REST paths'): the processors see each span's JSON form, and what they
 * return is decoded again, so a processor's invalid output is a failure (SpanProcessorFailed), never stored. Only
 * what a processor changed is checked again (decodeRewrittenSpan); a span that check does not take is decoded
 * by `Span` itself, for its verdict and its error.
 */
export const processDecodedSpans = (
  processors: ReadonlyArray<SpanProcessor>,
  spans: ReadonlyArray<Span>,
  context: SpanContext
): Effect.Effect<ReadonlyArray<Span>, SpanProcessorFailed> =>
  processSpans(processors, spans.map(spanWireOf) as ReadonlyArray<ProcessedSpan>, context).pipe(
    Effect.flatMap((outputs) => {
      const decoded: Array<Span | undefined> = new Array(outputs.length)
      let slow = false
      // The outputs keep the order of the spans they came from (a processor may only drop spans, not add any).
      let j = 0
      outputs.forEach((output, i) => {
        while (j < spans.length && spans[j]!.id !== output.id) j++
        decoded[i] = j < spans.length ? decodeRewrittenSpan(spans[j]!, output) : undefined
        if (decoded[i] === undefined) slow = true
      })
      if (!slow) return Effect.succeed(decoded as ReadonlyArray<Span>)
      return Effect.forEach(outputs, (output, i) => {
        const fast = decoded[i]
        return fast !== undefined
          ? Effect.succeed(fast)
          : decodeSpan(output).pipe(
              Effect.mapError(
                (e) =>
                  new SpanProcessorFailed({
                    processor: processors.map((p) => p.name).join(", "),
                    reason: `it returned an invalid span: ${e.message}`
                  })
              )
            )
      })
    })
  )

/**
 * `processSpans` over spans kept as JSON (OTLP's mapped spans): what the processors return is checked where it
 * differs from the span they were given (rewrittenSpanJson), so a processor's invalid output is a failure
 * (SpanProcessorFailed), never stored; a span that check does not take is decoded by `Span`, for its verdict and error.
 */
export const processSpansJson = <S extends ProcessedSpan>(
  processors: ReadonlyArray<SpanProcessor>,
  spans: ReadonlyArray<S>,
  context: SpanContext
): Effect.Effect<ReadonlyArray<S>, SpanProcessorFailed> =>
  Effect.suspend(() => {
    // Copies for the processors: a processor changing its span in place must not change what it is compared with.
    const given = spans.map((s) => ({ ...s }))
    return processSpans(processors, given, context).pipe(
      Effect.flatMap((outputs) => {
        let j = 0
        return Effect.forEach(outputs, (output) => {
          while (j < spans.length && spans[j]!.id !== output.id) j++
          const before = spans[j]
          const checked = before !== undefined ? rewrittenSpanJson(before, output) : undefined
          if (checked !== undefined) return Effect.succeed(checked as S)
          // A payload the mapping made that the check refuses by itself (a non-finite number, a NUL character sent
          // in the export) is not the processor's doing: the span goes on as it would without processors.
          if (before !== undefined && rewrittenSpanJson(before, before) === undefined) return Effect.succeed(output)
          return decodeSpan(output).pipe(
            Effect.as(output),
            Effect.mapError(
              (e) =>
                new SpanProcessorFailed({
                  processor: processors.map((p) => p.name).join(", "),
                  reason: `it returned an invalid span: ${e.message}`
                })
            )
          )
        })
      })
    )
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
