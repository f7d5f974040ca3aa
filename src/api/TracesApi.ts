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
  )
  .add(
    HttpApiEndpoint.post("create", "/traces")
      .setPayload(CreateTraceRequest)
      .addSuccess(TraceCreateResult)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Record a trace with up to 1000 spans, in one transaction")
  )
  .add(
    HttpApiEndpoint.get("get", "/traces/:traceId")
      .setPath(TraceLookupPath)
      .addSuccess(TraceDetail)
      .annotate(OpenApi.Summary, "A trace with its spans, causal order and concurrent groups (by id or OpenTelemetry trace id)")
  )
  .add(
    HttpApiEndpoint.patch("finish", "/traces/:traceId")
      .setPath(TracePath)
      .setPayload(FinishTraceRequest)
      .addSuccess(TraceCreateResult)
      .annotate(OpenApi.Summary, "Record status, output, end time and totals")
  )
  .add(
    HttpApiEndpoint.del("remove", "/traces/:traceId")
      .setPath(TracePath)
      .addSuccess(DeleteResult)
      .annotate(OpenApi.Summary, "Soft-delete a trace")
  )
  .add(
    HttpApiEndpoint.post("appendSpans", "/traces/:traceId/spans")
      .setPath(TracePath)
      .setPayload(AppendSpansRequest)
      .addSuccess(AppendSpansResult)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Add or update up to 1000 spans of a running trace (idempotent on span id)")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
