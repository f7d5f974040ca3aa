import { Schema } from "effect"

/** An integer query parameter (a string on the wire) between min and max. */
export const PageNumber = (min: number, max: number) =>
  Schema.NumberFromString.pipe(Schema.int(), Schema.between(min, max))

/** `limit` 1..100 (default 50) and `offset` ≥ 0 (default 0), as every list route takes them. */
export const pageParams = {
  limit: Schema.optionalWith(PageNumber(1, 100), { default: () => 50 }),
  offset: Schema.optionalWith(PageNumber(0, Number.MAX_SAFE_INTEGER), { default: () => 0 })
}
