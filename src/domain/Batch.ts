import { Schema } from "effect"
import { required } from "./Described.ts"
import { JobId } from "./Ids.ts"
import { JsonValue } from "./Json.ts"
import { withExamples } from "./Examples.ts"

export const MAX_BATCH_OPERATIONS = 100
const BATCH_PATH_PREFIX = "/api/v1/"
const ORIGIN = "http://batch.invalid"

/**
 * The path and query an operation addresses once normalised as a URL would be (`..`, `%2e`, backslashes, and
 * percent-decoding as the router does), or
 * undefined when it leaves /api/v1/, names another origin, or targets the batch route itself (no recursion).
 */
export const batchTarget = (path: string): string | undefined => {
  if (!path.startsWith(BATCH_PATH_PREFIX)) return undefined
  let url: URL
  try {
    url = new URL(path, ORIGIN)
  } catch {
    return undefined
  }
  // The router matches the percent-decoded path (`/api/v1/%62atch` is the batch route): check that one too.
  let decoded: string
  try {
    decoded = decodeURI(url.pathname)
  } catch {
    return undefined
  }
  if (url.origin !== ORIGIN || url.hash !== "") return undefined
  if (!url.pathname.startsWith(BATCH_PATH_PREFIX) || !decoded.startsWith(BATCH_PATH_PREFIX)) return undefined
  if (decoded.toLowerCase().startsWith("/api/v1/batch")) return undefined
  return url.pathname + url.search
}

export const BatchMethod = Schema.Literal("GET", "POST", "PUT", "PATCH", "DELETE")

export const BatchOperation = Schema.Struct({
  method: Schema.propertySignature(BatchMethod).annotations({ description: "The operation's HTTP method" }),
  path: Schema.propertySignature(
    Schema.String.pipe(
      Schema.maxLength(2048),
      Schema.filter((p) => batchTarget(p) !== undefined, {
        message: () =>
          "path must be an /api/v1/ route of this API other than /api/v1/batch (e.g. /api/v1/traces?limit=5)"
      })
    )
  ).annotations({ description: "An /api/v1/ route of this API with its query string (not /api/v1/batch itself)" }),
  body: Schema.optional(JsonValue).annotations({ description: "The operation's JSON body; none for GET" })
})
  .annotations({ identifier: "BatchOperation", parseOptions: { onExcessProperty: "error" } })
  .pipe(
    Schema.filter((op) => op.method !== "GET" || op.body === undefined, {
      message: () => "a GET operation takes no body"
    })
  )
export type BatchOperation = typeof BatchOperation.Type

/** Body of POST /api/v1/batch (strict). */
export const BatchRequest = withExamples(
  Schema.Struct({
    operations: required(
      Schema.Array(BatchOperation).pipe(Schema.minItems(1), Schema.maxItems(MAX_BATCH_OPERATIONS)),
      "1 to 100 operations, run in order"
    ),
    async: Schema.optionalWith(Schema.Boolean, { default: () => false }).annotations({
      description: "Queue the batch and answer 202 with a job at once (default false: answer when all have run)"
    })
  }).annotations({ identifier: "BatchRequest", parseOptions: { onExcessProperty: "error" } }),
  {
    operations: [
      { method: "GET", path: "/api/v1/traces?limit=5" },
      { method: "GET", path: "/api/v1/usage" }
    ]
  }
)
export type BatchRequest = typeof BatchRequest.Type

/** One operation's answer: its HTTP status and body (JSON when the route answered JSON). */
export const BatchOperationResult = Schema.Struct({
  status: required(Schema.Int, "The operation's HTTP status"),
  body: required(Schema.Unknown, "The operation's answer (JSON when the route answered JSON)"),
  truncated: Schema.optional(Schema.Boolean).annotations({
    description: "Set on a background batch when the body was too large to keep (body is then null)"
  })
}).annotations({ identifier: "BatchOperationResult" })
export type BatchOperationResult = typeof BatchOperationResult.Type

/** 200: the operations ran in order; each has its own status. */
export const BatchResult = Schema.Struct({
  results: required(Schema.Array(BatchOperationResult), "One answer per operation, in order")
}).annotations({ identifier: "BatchResult" })

/** 202: `async: true`; follow GET /api/v1/jobs/{job_id}. */
export const BatchAccepted = Schema.Struct({
  job_id: required(JobId, "The job running the batch: follow GET /api/v1/jobs/{job_id}"),
  status: required(Schema.Literal("queued"), "Always queued"),
  total: required(Schema.Int, "How many operations it will run")
}).annotations({ identifier: "BatchAccepted" })

/** What a `batch.run` job stores: never a credential, only the account and the credential's id. */
export const BatchJobPayload = Schema.Struct({
  accountId: Schema.String,
  credentialId: Schema.String,
  operations: Schema.Array(BatchOperation)
})
export type BatchJobPayload = typeof BatchJobPayload.Type
