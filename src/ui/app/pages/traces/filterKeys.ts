/**
 * The list's filters, by their API parameter names: the page's URL carries exactly these, so a filtered list is a
 * link, and the API validates them with the contract's own schema. (A module of its own: the first-request prefetch
 * reads it without loading the rest.)
 */
export const FILTER_KEYS = [
  "status",
  "environment",
  "project_id",
  "session_id",
  "name",
  "model",
  "has_error",
  "date_from",
  "date_to",
  "min_cost",
  "min_duration_ms"
] as const
