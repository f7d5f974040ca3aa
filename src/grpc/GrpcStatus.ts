import protobuf from "protobufjs"

/** gRPC status codes this server answers with (google.rpc.Code). */
export const GrpcCode = {
  INVALID_ARGUMENT: 3,
  RESOURCE_EXHAUSTED: 8,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16
} as const

// google.rpc.Status with a google.rpc.RetryInfo detail, as gRPC clients read it from `grpc-status-details-bin`
// (googleapis google/rpc/status.proto and error_details.proto, Apache License 2.0).
const root = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } },
            Duration: { fields: { seconds: { type: "int64", id: 1 }, nanos: { type: "int32", id: 2 } } }
          }
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: "int32", id: 1 },
                message: { type: "string", id: 2 },
                details: { rule: "repeated", type: "google.protobuf.Any", id: 3 }
              }
            },
            RetryInfo: { fields: { retry_delay: { type: "google.protobuf.Duration", id: 1 } } }
          }
        }
      }
    }
  }
})
const Status = root.lookupType("google.rpc.Status")
const RetryInfo = root.lookupType("google.rpc.RetryInfo")

export const RETRY_INFO_TYPE_URL = "type.googleapis.com/google.rpc.RetryInfo"

/** The `grpc-status-details-bin` of a refusal the client should retry after `seconds`. */
export const statusWithRetryInfo = (code: number, message: string, seconds: number): Buffer =>
  Buffer.from(
    Status.encode(
      Status.create({
        code,
        message,
        details: [
          {
            type_url: RETRY_INFO_TYPE_URL,
            value: RetryInfo.encode(RetryInfo.create({ retry_delay: { seconds, nanos: 0 } })).finish()
          }
        ]
      })
    ).finish()
  )

/** The retry delay in seconds of a `grpc-status-details-bin`, if it carries a RetryInfo (for tests and clients). */
export const retryDelayOf = (details: Uint8Array): number | undefined => {
  const status = Status.toObject(Status.decode(details), { longs: Number }) as {
    details?: Array<{ type_url: string; value: Uint8Array }>
  }
  const info = status.details?.find((d) => d.type_url === RETRY_INFO_TYPE_URL)
  if (info === undefined) return undefined
  const decoded = RetryInfo.toObject(RetryInfo.decode(info.value), { longs: Number }) as {
    retry_delay?: { seconds?: number }
  }
  return decoded.retry_delay?.seconds ?? 0
}
