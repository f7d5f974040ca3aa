import { Arbitrary, FastCheck as fc, Schema } from "effect"
import { EnforcementCheckRequest } from "#src/domain/Enforcement"

// Check bodies for the properties that hold the check's lean route to the schema and to the API's endpoint.

export const CHECK_FIELDS = [
  "run_id",
  "project_id",
  "trace_id",
  "tool_name",
  "tool_args_hash",
  "model",
  "proposed_tokens",
  "proposed_usd",
  "step_index"
] as const

export const A_UUID = "7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10"

/** Values for a field: anything JSON, and the edges of every field's rules. */
export const anyValue = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(
    null,
    undefined,
    -0,
    -1,
    0,
    1.5,
    1e12,
    1e12 + 1,
    1e13,
    Number.MAX_SAFE_INTEGER,
    Number.MAX_SAFE_INTEGER + 1,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    "",
    "a",
    "x".repeat(200),
    "x".repeat(201),
    "é".repeat(200),
    "a\u0000b",
    "\ud800",
    "\ud83d\ude00",
    A_UUID,
    A_UUID.toUpperCase(),
    `${A_UUID}0`,
    A_UUID.replace(/-/g, ""),
    " 7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10",
    "0",
    true,
    [],
    {}
  )
)

/** A check body as a client sends it: a valid one, then fields dropped, changed, added or made undefined. */
export const validCheckBody = Arbitrary.make(EnforcementCheckRequest).map(
  (body) => JSON.parse(JSON.stringify(Schema.encodeSync(EnforcementCheckRequest)(body))) as Record<string, unknown>
)
const mutation = fc.record({
  field: fc.oneof(
    fc.constantFrom(...CHECK_FIELDS),
    fc.constantFrom("extra", "runId", "__proto__", "toString"),
    fc.string()
  ),
  value: anyValue,
  drop: fc.boolean()
})
/** A check body: valid, mutated (fields dropped, changed, added or made undefined), or any value at all. */
export const checkBody = fc.oneof(
  validCheckBody,
  fc.tuple(validCheckBody, fc.array(mutation, { minLength: 1, maxLength: 3 })).map(([valid, mutations]) => {
    const out: Record<string, unknown> = { ...valid }
    for (const m of mutations) {
      if (m.drop) delete out[m.field]
      else Object.defineProperty(out, m.field, { value: m.value, enumerable: true, writable: true, configurable: true })
    }
    return out as unknown
  }),
  anyValue
)
