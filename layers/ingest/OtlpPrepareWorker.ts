/**
 * The thread OtlpPreparer runs large exports on (protobuf or JSON): decompress, decode, map, finalize and encode the
 * COPY rows (`prepareExport`).
 */
import { Either } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { decodeJsonBody, decodeProtobufBody, prepareExport } from "./OtlpPrepare.ts"
import type { PrepareReply, PrepareRequest } from "./OtlpPreparer.ts"

declare const self: Worker

self.onmessage = (event: MessageEvent<PrepareRequest>) => {
  const { id, accountId, format, body, contentEncoding, maxDecompressedBytes, prices } = event.data
  let reply: PrepareReply
  try {
    const decode = format === "json" ? decodeJsonBody : decodeProtobufBody
    const decoded = decode(body, contentEncoding, maxDecompressedBytes)
    if (Either.isLeft(decoded)) reply = { id, refusal: decoded.left }
    else {
      const prepared = prepareExport(accountId as AccountId, decoded.right, new Map(prices))
      reply = { id, prepared }
    }
  } catch (error) {
    reply = { id, failure: error instanceof Error ? error.message : String(error) }
  }
  // The rows are moved, not copied: their buffer is CopyData's own (never the shared pool), and the view keeps its bounds.
  self.postMessage(reply, "prepared" in reply ? [reply.prepared.copy.buffer as ArrayBuffer] : [])
}
