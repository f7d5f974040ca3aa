/**
 * The thread OtlpPreparer runs large exports on (protobuf or JSON): decompress, decode, map, finalize and encode the
 * COPY rows (`prepareExport`).
 */
import { Either } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { decodeJsonBody, decodeProtobufBody, prepareExport } from "./OtlpPrepare.ts"
import type { ModelPrice } from "#src/domain/pricing/Prices"
import type { PrepareReply, PrepareRequest, PrepareThreadSetup } from "./OtlpPreparer.ts"
import { lowerThreadPriority } from "./ThreadPriority.ts"

declare const self: Worker

/** The price table, from the setup message that comes before any export. */
let prices: ReadonlyMap<string, ModelPrice> = new Map()

self.onmessage = (event: MessageEvent<PrepareRequest | PrepareThreadSetup>) => {
  if ("prices" in event.data) {
    prices = new Map(event.data.prices)
    if (event.data.nice > 0) lowerThreadPriority(event.data.nice)
    return
  }
  const { id, accountId, format, body, contentEncoding, maxDecompressedBytes } = event.data
  let reply: PrepareReply
  try {
    const decode = format === "json" ? decodeJsonBody : decodeProtobufBody
    const decoded = decode(body, contentEncoding, maxDecompressedBytes)
    if (Either.isLeft(decoded)) reply = { id, refusal: decoded.left }
    else {
      const prepared = prepareExport(accountId as AccountId, decoded.right, prices)
      reply = { id, prepared }
    }
  } catch (error) {
    reply = { id, failure: error instanceof Error ? error.message : String(error) }
  }
  // The rows are moved, not copied: their buffer is CopyData's own (never the shared pool), and the view keeps its bounds.
  self.postMessage(reply, "prepared" in reply ? [reply.prepared.copy.buffer as ArrayBuffer] : [])
}
