/**
 * A PostgreSQL array literal of uuids, sent as one parameter and cast with `::uuid[]` (`= ANY(…)`, `unnest(…)`):
 * one statement for any number of ids. Uuids need no quoting; the cast refuses anything that is not one.
 */
export const uuidArray = (ids: Iterable<string>) => `{${[...ids].join(",")}}`

/** A PostgreSQL array literal of texts (cast with `::text[]`): each element quoted, `"` and `\` escaped. */
export const textArray = (values: Iterable<string>) =>
  `{${[...values].map((v) => `"${v.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`).join(",")}}`
