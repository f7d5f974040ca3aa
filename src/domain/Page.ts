import { Schema } from "effect"

/**
 * Plain decimal digits, and nothing else: `Number()` behind `NumberFromString` would also take `0x10`, `+5`,
 * ` 5`, `1e2` and `5.0`, so a query parameter could be spelled many ways. Sixteen digits cover every safe integer.
 */
export const DecimalDigits = Schema.String.pipe(
  Schema.pattern(/^[0-9]{1,16}$/, { message: () => "must be a whole number written in plain decimal digits" })
)

/** An integer query parameter (a string of plain decimal digits on the wire) between min and max. */
export const PageNumber = (min: number, max: number) =>
  Schema.compose(DecimalDigits, Schema.NumberFromString).pipe(Schema.int(), Schema.between(min, max))

/** `limit` 1..100 (default 50) and `offset` ≥ 0 (default 0), as every list route takes them. */
export const pageParams = {
  limit: Schema.optionalWith(PageNumber(1, 100), { default: () => 50 }),
  offset: Schema.optionalWith(PageNumber(0, Number.MAX_SAFE_INTEGER), { default: () => 0 })
}
