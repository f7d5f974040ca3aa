/**
 * A PostgreSQL array literal of uuids, sent as one parameter and cast with `::uuid[]` (`= ANY(…)`, `unnest(…)`):
 * one statement for any number of ids. Uuids need no quoting; the cast refuses anything that is not one.
 */
export const uuidArray = (ids: Iterable<string>) => `{${[...ids].join(",")}}`

/** A PostgreSQL array literal of strings (each quoted, `"` and `\` escaped), sent as one parameter and cast with `::text[]`. */
export const textArray = (items: Iterable<string>) =>
  `{${[...items].map((s) => `"${s.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`).join(",")}}`
