import { Either, ParseResult, Schema } from "effect"
import { SearchRequest } from "../../../../domain/Search.ts"

/** The search page's URL keys besides `q`: the API's span-search filters, by their own names. */
export const SEARCH_FILTER_KEYS = [
  "span_type",
  "status",
  "model",
  "project_id",
  "date_from",
  "date_to",
  "min_cost",
  "min_duration_ms"
] as const
const NUMERIC = new Set(["min_cost", "min_duration_ms"])

const decodeRequest = Schema.decodeUnknownEither(SearchRequest, { errors: "all", onExcessProperty: "error" })

/**
 * The search request a /ui/search URL stands for, checked by the contract's schema; `undefined` when there is no
 * query yet, or what is wrong, in words.
 */
export const searchRequest = (
  search: URLSearchParams,
  limit = 50
): Either.Either<typeof SearchRequest.Type | undefined, string> => {
  const query = search.get("q")?.trim() ?? ""
  if (query === "") return Either.right(undefined)
  const filters: Record<string, unknown> = {}
  for (const key of SEARCH_FILTER_KEYS) {
    const value = search.get(key)?.trim()
    if (value === undefined || value === "") continue
    filters[key] = NUMERIC.has(key) && value !== "" && Number.isFinite(Number(value)) ? Number(value) : value
  }
  const raw = { query, limit, ...(Object.keys(filters).length > 0 ? { filters } : {}) }
  return Either.mapLeft(decodeRequest(raw), (error) =>
    ParseResult.ArrayFormatter.formatErrorSync(error)
      .map((issue) => `${issue.path.filter((p) => p !== "filters").join(".") || "query"}: ${issue.message}`)
      .join("; ")
  )
}
