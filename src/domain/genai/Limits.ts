/** The size caps of a mapped span (docs/otel-mapping.md): what is kept of each value before it is cut. */

/** Largest stored `input` / `output`, in serialised characters (docs/otel-mapping.md, "Input and output"). */
export const MAX_IO_CHARS = 1_048_576
/** Largest stored error string (docs/otel-mapping.md, "Errors"). */
export const MAX_ERROR_CHARS = 4000
export const MAX_STACKTRACE_CHARS = 16_000
export const MAX_HINT_IO_CHARS = 262_144
export const ATTRIBUTES_BUDGET = 65_536
export const RESOURCE_BUDGET = 16_384
export const EVENTS_BUDGET = 32_768
export const MAX_EVENTS = 32
export const MAX_META_TEXT = 1000
export const MAX_META_LONG_TEXT = 4000
export const MAX_TAGS = 50
export const MAX_TAG_CHARS = 200
/** Characters kept of one vendor's span details, and of a span's trace metadata hint. */
export const CONVENTION_BUDGET = 16_384
/** Latest instant the `Instant` schema accepts (9999-12-31T23:59:59.999Z). */
export const MAX_MS = Date.UTC(10000, 0, 1) - 1
