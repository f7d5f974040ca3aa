import { TapedeckApi } from "../../../api/Api.ts"
import type { TraceDetail } from "../../../domain/Trace.ts"
import { ApiCallError } from "./client.ts"
import { takePrefetched } from "./prefetch.ts"

/** A trace with its spans as the API sends them: the contract's own encoded type (ISO strings for instants). */
export type TraceDetailWire = typeof TraceDetail.Encoded
export type SpanWire = TraceDetailWire["spans"][number]

/** The contract's route for one trace (its prefix included), so the path cannot drift from the server's. */
const TRACE_ROUTE: string = (() => {
  const path = TapedeckApi.groups.traces?.endpoints.get?.path
  if (path === undefined) throw new Error("the contract has no traces.get endpoint")
  return path
})()

/**
 * GET /api/v1/traces/{traceId} read as the contract's wire type, without decoding every span: a cold decode of a
 * 10,000-span trace by its schema takes over a second in a browser, longer than drawing it. Each span is decoded by
 * the contract's Span schema when it is inspected (SpanInspector), and the typed client serves every other call.
 */
export const fetchTraceWire = async (key: string, traceId: string, signal?: AbortSignal): Promise<TraceDetailWire> => {
  const url = TRACE_ROUTE.replace(":traceId", encodeURIComponent(traceId))
  // The request the prefetch script may already have sent for this page (same URL, same key).
  const response = await (takePrefetched(url, key) ??
    fetch(url, {
      headers: { authorization: `Bearer ${key}`, accept: "application/json" },
      ...(signal === undefined ? {} : { signal })
    }))
  if (!response.ok) {
    const body = (await response.json().catch(() => undefined)) as { error?: string; code?: string } | undefined
    throw new ApiCallError(
      body?.code ?? (response.status === 401 ? "unauthorized" : "http"),
      body?.error ?? `HTTP ${response.status}`,
      response.status
    )
  }
  return (await response.json()) as TraceDetailWire
}
