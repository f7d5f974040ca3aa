import { Effect, Option } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { AppConfig } from "../config/AppConfig.ts"
import type { PreparedExport } from "./OtlpPrepare.ts"

/** Bodies below this size are prepared on the request's thread: the hand-over would cost more than it saves. */
export const PREPARE_THREAD_MIN_BYTES = 64 * 1024

export interface PrepareRequest {
  readonly id: number
  readonly accountId: string
  readonly body: Uint8Array
  readonly contentEncoding: string | undefined
  readonly maxDecompressedBytes: number
}

/** The thread's answer. */
export type PrepareReply =
  & { readonly id: number }
  & ({ readonly prepared: PreparedExport } | { readonly refusal: string } | { readonly failure: string })

/** What the thread made of a body: prepared, or refused with the 400's message. */
export type Prepared =
  | { readonly _tag: "Prepared"; readonly prepared: PreparedExport }
  | { readonly _tag: "Refused"; readonly message: string }

/**
 * Runs `prepareExport` for large protobuf exports on a thread of its own (TAPEDECK_INGEST_PREPARE_THREAD, with
 * DATABASE_URL: the prepared rows go in by COPY, which PGlite does not take), so that decoding, mapping and
 * encoding the rows of one export overlap with the database work of others instead of queueing on the request
 * thread. `prepare` answers none when the thread is off or failed on this body; the caller then does the work
 * itself. A thread that dies is replaced on the next export.
 */
export class OtlpPreparer extends Effect.Service<OtlpPreparer>()("tapedeck/OtlpPreparer", {
  scoped: Effect.gen(function*() {
    const config = yield* AppConfig
    const enabled = config.ingestPrepareThread && Option.isSome(config.databaseUrl)
    const pending = new Map<number, (reply: PrepareReply | undefined) => void>()
    let worker: Worker | undefined
    let nextId = 0

    const failPending = () => {
      for (const settle of pending.values()) settle(undefined)
      pending.clear()
    }
    const start = () => {
      const thread = new Worker(new URL("./OtlpPrepareWorker.ts", import.meta.url).href)
      thread.onmessage = (event: MessageEvent<PrepareReply>) => {
        const settle = pending.get(event.data.id)
        pending.delete(event.data.id)
        settle?.(event.data)
      }
      thread.onerror = (event) => {
        event.preventDefault()
        if (worker === thread) worker = undefined
        thread.terminate()
        failPending()
      }
      // The thread must not keep the process alive after the server has stopped.
      thread.unref()
      return thread
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        worker?.terminate()
        worker = undefined
        failPending()
      })
    )

    const prepare = (
      accountId: AccountId,
      body: Uint8Array,
      contentEncoding: string | undefined
    ): Effect.Effect<Option.Option<Prepared>> => {
      if (!enabled || body.byteLength < PREPARE_THREAD_MIN_BYTES) return Effect.succeedNone
      return Effect.async<Option.Option<Prepared>>((resume) => {
        const id = nextId++
        pending.set(id, (reply) => {
          if (reply === undefined || "failure" in reply) resume(Effect.succeedNone)
          else if ("refusal" in reply) resume(Effect.succeedSome({ _tag: "Refused", message: reply.refusal }))
          else resume(Effect.succeedSome({ _tag: "Prepared", prepared: reply.prepared }))
        })
        worker ??= start()
        const request: PrepareRequest = {
          id,
          accountId,
          body,
          contentEncoding,
          maxDecompressedBytes: config.ingestMaxDecompressedBytes
        }
        // Copied, not moved: the caller keeps the body for the case it has to map the export itself.
        worker.postMessage(request)
        return Effect.sync(() => void pending.delete(id))
      })
    }

    return { prepare } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
