import { Context, Effect, Option } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { AppConfig } from "../config/AppConfig.ts"
import type { ModelPrice } from "#src/domain/pricing/Prices"
import { ModelPrices } from "../llm/Prices.ts"
import type { PreparedExport } from "./OtlpPrepare.ts"

/** Bodies below this size are prepared on the request's thread: the hand-over would cost more than it saves. */
export const PREPARE_THREAD_MIN_BYTES = 64 * 1024
/**
 * The same for OTLP/JSON bodies, smaller: parsing JSON costs several times what decoding the same spans as protobuf
 * does, so a few dozen spans already keep the request thread (and the enforcement checks queued behind it) busy.
 */
export const PREPARE_THREAD_MIN_JSON_BYTES = 16 * 1024

/** How an export's body is encoded. */
export type ExportFormat = "protobuf" | "json"

/**
 * What the thread is told once, first: the server's price table (defaults and overrides), for estimated costs, and
 * the nice value it gives itself (TAPEDECK_INGEST_PREPARE_THREAD_NICE).
 */
export interface PrepareThreadSetup {
  readonly prices: ReadonlyArray<readonly [string, ModelPrice]>
  readonly nice: number
}

export interface PrepareRequest {
  readonly id: number
  readonly accountId: string
  readonly format: ExportFormat
  readonly body: Uint8Array
  readonly contentEncoding: string | undefined
  readonly maxDecompressedBytes: number
}

/** The thread's answer. */
export type PrepareReply = { readonly id: number } & (
  | { readonly prepared: PreparedExport }
  | { readonly refusal: string }
  | { readonly failure: string }
)

/** The thread's entry module (tests give one that dies, to see the exports fall back to the request thread). */
export class PrepareThreadScript extends Context.Tag("tapedeck/PrepareThreadScript")<PrepareThreadScript, string>() {}

/** What the thread made of a body: prepared, or refused with the 400's message. */
export type Prepared =
  | { readonly _tag: "Prepared"; readonly prepared: PreparedExport }
  | { readonly _tag: "Refused"; readonly message: string }

/**
 * Runs `prepareExport` for large exports (protobuf, and JSON from a smaller size) on a thread of its own (TAPEDECK_INGEST_PREPARE_THREAD, with
 * DATABASE_URL: the prepared rows go in by COPY, which PGlite does not take), so that decoding, mapping and
 * encoding the rows of one export overlap with the database work of others instead of queueing on the request
 * thread, where enforcement checks would wait behind them. `prepare` answers none when the thread is off or failed on this body; the caller then does the work
 * itself. A thread that dies is replaced on the next export.
 */
export class OtlpPreparer extends Effect.Service<OtlpPreparer>()("tapedeck/OtlpPreparer", {
  scoped: Effect.gen(function* () {
    const config = yield* AppConfig
    const prices = [...(yield* ModelPrices).table]
    const enabled = config.ingestPrepareThread && Option.isSome(config.databaseUrl)
    const script = Option.getOrElse(
      yield* Effect.serviceOption(PrepareThreadScript),
      () => new URL("./OtlpPrepareWorker.ts", import.meta.url).href
    )
    /** A live thread and the answers it owes, by request id (undefined settles one as "do it yourself"). */
    interface Thread {
      readonly worker: Worker
      readonly pending: Map<number, (reply: PrepareReply | undefined) => void>
    }
    let current: Thread | undefined
    let nextId = 0

    /** Stops a thread and settles what it owed; the next export starts a new one. */
    const retire = (thread: Thread) => {
      if (current === thread) current = undefined
      thread.worker.terminate()
      for (const settle of thread.pending.values()) settle(undefined)
      thread.pending.clear()
    }
    const start = (): Thread => {
      const thread: Thread = { worker: new Worker(script), pending: new Map() }
      thread.worker.onmessage = (event: MessageEvent<PrepareReply>) => {
        const settle = thread.pending.get(event.data.id)
        thread.pending.delete(event.data.id)
        settle?.(event.data)
      }
      // An uncaught error, or the thread ending for any reason: nothing more will come from it.
      thread.worker.onerror = (event) => {
        event.preventDefault()
        retire(thread)
      }
      thread.worker.addEventListener("close", () => retire(thread))
      // Once per thread, not with every export (cloning the table cost more than the rest of a request's message).
      thread.worker.postMessage({ prices, nice: config.ingestPrepareThreadNice } satisfies PrepareThreadSetup)
      // The thread must not keep the process alive after the server has stopped.
      thread.worker.unref()
      return thread
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => current && retire(current)))

    const prepare = Effect.fn("OtlpPreparer.prepare")(function* (
      accountId: AccountId,
      format: ExportFormat,
      body: Uint8Array,
      contentEncoding: string | undefined
    ) {
      const minBytes = format === "json" ? PREPARE_THREAD_MIN_JSON_BYTES : PREPARE_THREAD_MIN_BYTES
      if (!enabled || body.byteLength < minBytes) return Option.none<Prepared>()
      return yield* Effect.async<Option.Option<Prepared>>((resume) => {
        const id = nextId++
        const thread = (current ??= start())
        thread.pending.set(id, (reply) => {
          if (reply === undefined || "failure" in reply) resume(Effect.succeedNone)
          else if ("refusal" in reply) resume(Effect.succeedSome({ _tag: "Refused", message: reply.refusal }))
          else resume(Effect.succeedSome({ _tag: "Prepared", prepared: reply.prepared }))
        })
        // The caller keeps the body for the case it has to map the export itself: the thread gets a copy, moved to it
        // (copying the bytes here and moving them costs a fraction of what posting the body to be cloned does).
        // `new Uint8Array(view)` copies into a buffer of its own (a Buffer's `slice` would be a view of the caller's).
        const copy = new Uint8Array(body)
        const request: PrepareRequest = {
          id,
          accountId,
          format,
          body: copy,
          contentEncoding,
          maxDecompressedBytes: config.ingestMaxDecompressedBytes
        }
        thread.worker.postMessage(request, [copy.buffer])
        return Effect.sync(() => void thread.pending.delete(id))
      })
    })

    return { prepare } as const
  }),
  dependencies: [AppConfig.Default, ModelPrices.Default]
}) {}
