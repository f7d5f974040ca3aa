import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  AppendSpansRequest,
  AppendSpansResult,
  CreateTraceRequest,
  DeleteResult,
  FinishTraceRequest,
  ListTracesParams,
  TraceCreateResult,
  TraceDetail,
  TraceList,
  TraceLookupPath,
  TracePath
} from "../domain/Trace.ts"
import { ConflictWire } from "./ApiErrors.ts"
import { Authentication, RateLimit } from "./Security.ts"

/** The create route's full path (the group is mounted under /api/v1). */
export const TRACE_CREATE_PATH = "/api/v1/traces"

export class TracesApi extends HttpApiGroup.make("traces")
  .add(
    HttpApiEndpoint.get("list", "/traces")
      .setUrlParams(ListTracesParams)
      .addSuccess(TraceList)
      .annotate(OpenApi.Summary, "List traces, newest first (offset or keyset cursor)")
      .annotate(
        OpenApi.Description,
        "Production traces of the caller's account by default (`env=sandbox` lists fork-replay results instead), narrowed by the filters below (status, project, session, name, model, errors, dates, cost, duration). Page with `limit` and `offset`, or follow `nextCursor` (keyset paging, stable while traces are being written). Items carry the totals, not the spans."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/traces")
      .setPayload(CreateTraceRequest)
      .addSuccess(TraceCreateResult)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Record a trace with up to 1000 spans, in one transaction")
      .annotate(
        OpenApi.Description,
        "Creates the trace and its spans (at most 1000) atomically. Span ids must be unique and each `parent_id` must name a span of the same trace. Spans with a `model` and token counts but no `cost` get one estimated from the server's price table and are marked `cost_estimated: true`; a cost you send is kept as sent. Totals not given are computed from the spans. An id already used answers 409. A `status` of completed or failed queues the trace's downstream processing and returns its `jobId`."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/traces/:traceId")
      .setPath(TraceLookupPath)
      .addSuccess(TraceDetail)
      .annotate(
        OpenApi.Summary,
        "A trace with its spans, causal order and concurrent groups (by id or OpenTelemetry trace id)"
      )
      .annotate(
        OpenApi.Description,
        "The trace, its spans ordered by start time, the causal order (parents before children) and the groups of spans that ran concurrently. The id is the trace's UUID or, for a trace sent over OTLP, the 32-hex OpenTelemetry trace id your own logs show. A trace of another account, a deleted one or an unknown id answers 404."
      )
  )
  .add(
    HttpApiEndpoint.patch("finish", "/traces/:traceId")
      .setPath(TracePath)
      .setPayload(FinishTraceRequest)
      .addSuccess(TraceCreateResult)
      .annotate(OpenApi.Summary, "Record status, output, end time and totals")
      .annotate(
        OpenApi.Description,
        "Completes the HTTP lifecycle of a trace created as running: every field is optional, only the ones given change. Moving the trace to completed or failed queues its downstream processing once and returns the `jobId`."
      )
  )
  .add(
    HttpApiEndpoint.del("remove", "/traces/:traceId")
      .setPath(TracePath)
      .addSuccess(DeleteResult)
      .annotate(OpenApi.Summary, "Soft-delete a trace")
      .annotate(
        OpenApi.Description,
        "Hides the trace from every read at once; its rows are purged after the retention period (TAPEDECK_RETENTION_DAYS_DELETED)."
      )
  )
  .add(
    HttpApiEndpoint.post("appendSpans", "/traces/:traceId/spans")
      .setPath(TracePath)
      .setPayload(AppendSpansRequest)
      .addSuccess(AppendSpansResult)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Add or update up to 1000 spans of a running trace (idempotent on span id)")
      .annotate(
        OpenApi.Description,
        "Streams spans into a trace that is still running. Sending a span id again replaces that span, so retries are safe. Missing costs are estimated as on create, and the trace's totals are recomputed. A finished trace answers 409."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
