import { Either, ParseResult, Schema } from "effect"
import { ListTracesParams, type Trace } from "../../../../domain/Trace.ts"
import { FILTER_KEYS } from "./filterKeys.ts"

export { FILTER_KEYS } from "./filterKeys.ts"
export type FilterKey = (typeof FILTER_KEYS)[number]

/** Filter values as text (URL and form), only the ones set. */
export type TraceFilters = Partial<Record<FilterKey, string>>

/** The filters in a query string: known keys with a non-blank value; anything else is ignored. */
export const filtersFromSearch = (search: URLSearchParams): TraceFilters => {
  const filters: TraceFilters = {}
  for (const key of FILTER_KEYS) {
    const value = search.get(key)?.trim()
    if (value !== undefined && value !== "") filters[key] = value
  }
  return filters
}

/** The canonical query string of `filters` (fixed key order, blanks dropped), without the leading `?`. */
export const filtersToSearch = (filters: TraceFilters): string => {
  const search = new URLSearchParams()
  for (const key of FILTER_KEYS) {
    const value = filters[key]?.trim()
    if (value !== undefined && value !== "") search.set(key, value)
  }
  return search.toString()
}

/** The list request's parameters, decoded by the contract's schema (the client encodes them back). */
export type ListParams = typeof ListTracesParams.Type

const decodeParams = Schema.decodeUnknownEither(ListTracesParams, { errors: "all", onExcessProperty: "error" })

/**
 * The first page's parameters for `filters`, or what is wrong with them, in words (field: problem), before any
 * request is sent: the same checks the server makes.
 */
export const listParams = (
  filters: TraceFilters,
  page: { readonly limit: number; readonly cursor?: string | undefined }
): Either.Either<ListParams, string> => {
  const raw: Record<string, string> = { limit: String(page.limit), total: "capped", ...filters }
  if (page.cursor !== undefined) raw.cursor = page.cursor
  return Either.mapLeft(decodeParams(raw), (error) =>
    ParseResult.ArrayFormatter.formatErrorSync(error)
      .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "filters"}: ${issue.message}`)
      .join("; ")
  )
}

/**
 * Whether a trace that arrived live belongs in the filtered list: `true` or `false` when the trace itself tells,
 * `undefined` when it cannot (a model or error filter depends on its spans: the list is re-read instead).
 */
export const matchesFilters = (trace: Trace, params: ListParams): boolean | undefined => {
  if (params.status !== undefined && trace.status !== params.status) return false
  const environment = params.environment ?? (params.env === "sandbox" ? "sandbox" : "production")
  if ((trace.environment ?? "production") !== environment) return false
  if (params.project_id !== undefined && trace.projectId !== params.project_id) return false
  if (params.session_id !== undefined && trace.sessionId !== params.session_id) return false
  if (params.name !== undefined && !(trace.name ?? "").toLowerCase().includes(params.name.toLowerCase())) return false
  const started = trace.startedAt.epochMillis
  if (params.date_from !== undefined && started < params.date_from.epochMillis) return false
  if (params.date_to !== undefined && started > params.date_to.epochMillis) return false
  if (params.min_cost !== undefined && Number(trace.totalCost ?? 0) < params.min_cost) return false
  if (params.min_duration_ms !== undefined && (trace.totalDurationMs ?? 0) < params.min_duration_ms) return false
  if (params.model !== undefined || params.has_error !== undefined) return undefined
  return true
}
