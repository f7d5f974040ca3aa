import { describe, expect, test } from "bun:test"
import { Effect, Either, Option, Schema } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { Span } from "#src/domain/Span"
import {
  type ProcessedSpan,
  processDecodedSpans,
  type SpanContext,
  type SpanProcessor
} from "#layers/extensions/SpanProcessors"

const context: SpanContext = { accountId: crypto.randomUUID() as AccountId, traceId: crypto.randomUUID(), path: "rest" }
const decode = Schema.decodeUnknownSync(Span)
const root = crypto.randomUUID()
const child = crypto.randomUUID()
const grandchild = crypto.randomUUID()
const spans = [
  decode({
    id: root,
    parent_id: null,
    span_type: "llm_call",
    name: "ask a@b.io",
    model: "gpt-4o-mini",
    input: { messages: [{ role: "user", content: "hello a@b.io" }] },
    output: "fine",
    metadata: { who: "a@b.io" },
    started_at: "2026-01-01T00:00:00.000Z",
    ended_at: "2026-01-01T00:00:01.000Z",
    team: "blue"
  }),
  decode({
    id: child,
    parent_id: root,
    span_type: "tool_call",
    name: "drop me",
    started_at: "2026-01-01T00:00:00.500Z"
  }),
  decode({
    id: grandchild,
    parent_id: child,
    span_type: "action",
    name: "keep",
    started_at: "2026-01-01T00:00:00.600Z"
  })
]

const processor = (process: SpanProcessor["process"]): SpanProcessor => ({ name: "under-test", process })
const run = (processors: ReadonlyArray<SpanProcessor>) =>
  Effect.runPromise(Effect.either(processDecodedSpans(processors, spans, context)))
const encode = Schema.encodeSync(Schema.Array(Span))

describe("processDecodedSpans", () => {
  test("a processor that returns every span as given leaves the batch as decoded", async () => {
    const result = await run([processor((span) => Effect.succeedSome(span))])
    expect(encode(Either.getOrThrow(result))).toEqual(encode(spans))
  })

  test("rewritten spans come back decoded: instants as DateTimes, extras kept, dropped spans' children reparented", async () => {
    const mask = processor((span) =>
      span.name === "drop me"
        ? Effect.succeedNone
        : Effect.succeedSome({ ...span, name: span.name.replace("a@b.io", "[email]"), metadata: { who: "[email]" } })
    )
    // The same processor answering later (an effect to run, not an answer at hand) gives the same batch.
    const later = processor((span, ctx) => Effect.suspend(() => mask.process(span, ctx)).pipe(Effect.delay(1)))
    for (const processors of [[mask], [later]]) {
      const out = Either.getOrThrow(await run(processors))
      expect(out.map((s): string => s.id)).toEqual([root, grandchild])
      expect(out[0]!.name).toBe("ask [email]")
      expect(out[0]!.metadata).toEqual({ who: "[email]" })
      expect(out[0]!.team).toBe("blue")
      expect(out[1]!.parent_id as string).toBe(root)
      expect(encode(out)).toEqual(encode(out.map((s) => decode(Schema.encodeSync(Span)(s)))))
    }
  })

  const refused: ReadonlyArray<readonly [string, (span: ProcessedSpan) => unknown]> = [
    ["a name too long", (span) => ({ ...span, name: "x".repeat(501) })],
    ["a start that is not an instant", (span) => ({ ...span, started_at: "yesterday" })],
    ["no name", ({ name: _, ...rest }) => rest],
    ["no parent_id", ({ parent_id: _, ...rest }) => rest],
    ["an unknown span type", (span) => ({ ...span, span_type: "thinking" })],
    ["a negative cost", (span) => ({ ...span, cost: -1 })],
    ["an unpaired surrogate in the output", (span) => ({ ...span, output: "\ud800" })],
    ["metadata that is not an object", (span) => ({ ...span, metadata: ["a"] })],
    // Changed on the object the processor was given, and that same object returned.
    ["the given span's name made too long in place", (span) => Object.assign(span, { name: "x".repeat(501) })],
    [
      "the input's message made unstorable in place",
      (span) => {
        const input = span.input as { messages?: Array<{ content: string }> } | undefined
        if (input?.messages?.[0]) input.messages[0].content = "a\u0000b"
        return span
      }
    ]
  ]
  for (const [what, rewrite] of refused) {
    test(`a processor's output with ${what} fails the batch (SpanProcessorFailed), never passes it on`, async () => {
      // Every run sees fresh spans: a rewrite in place must not reach the other tests' batches.
      const fresh = spans.map((s) => decode(Schema.encodeSync(Span)(s)))
      const result = await Effect.runPromise(
        Effect.either(
          processDecodedSpans(
            [processor((span) => Effect.succeed(Option.some(rewrite(span) as ProcessedSpan)))],
            fresh,
            context
          )
        )
      )
      expect(Either.isLeft(result)).toBe(true)
      const error = Either.getLeft(result).pipe(Option.getOrThrow)
      expect(error._tag).toBe("SpanProcessorFailed")
      expect(error.processor).toBe("under-test")
      expect(error.reason).toStartWith("it returned")
    })
  }

  test("a processor's failure or defect fails the batch with its reason", async () => {
    for (const process of [
      () => Effect.fail(new Error("classifier down")),
      () => Effect.die(new Error("classifier down")),
      () => Effect.fail("classifier down").pipe(Effect.delay(1))
    ]) {
      const error = Either.getLeft(await run([processor(process)])).pipe(Option.getOrThrow)
      expect(error._tag).toBe("SpanProcessorFailed")
      expect(error.reason).toBe("classifier down")
    }
  })
})
