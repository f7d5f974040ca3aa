/**
 * The thread OtlpPreparer runs large protobuf exports on: decompress, decode, map, finalize and encode the COPY rows
 * (`prepareExport`).
 */
import { Either } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { decodeProtobufBody, prepareExport } from "./OtlpPrepare.ts"
import type { PrepareReply, PrepareRequest } from "./OtlpPreparer.ts"

declare const self: Worker

/** A fresh ArrayBuffer holding exactly `bytes` (a view into a larger or shared one is copied, never detached). */
const ownBuffer = (bytes: Uint8Array) =>
  bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer
    ? bytes
    : bytes.slice()

self.onmessage = (event: MessageEvent<PrepareRequest>) => {
  const { id, accountId, body, contentEncoding, maxDecompressedBytes } = event.data
  let reply: PrepareReply
  try {
    const decoded = decodeProtobufBody(body, contentEncoding, maxDecompressedBytes)
    if (Either.isLeft(decoded)) reply = { id, refusal: decoded.left }
    else {
      const prepared = prepareExport(accountId as AccountId, decoded.right)
      reply = { id, prepared: { ...prepared, copy: ownBuffer(prepared.copy) } }
    }
  } catch (error) {
    reply = { id, failure: error instanceof Error ? error.message : String(error) }
  }
  // The rows are moved, not copied.
  self.postMessage(reply, "prepared" in reply ? [reply.prepared.copy.buffer as ArrayBuffer] : [])
}
