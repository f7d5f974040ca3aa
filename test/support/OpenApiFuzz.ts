import { FastCheck as fc } from "effect"

/**
 * Arbitraries derived from the service's own OpenAPI document, for route fuzzing: values that are valid for
 * a JSON Schema (so a fuzzed body gets past the first check and reaches deeper code), and malformed and
 * edge-case variants of them (wrong types, extra properties, huge strings, deep nesting).
 */
export type JsonSchema = Record<string, any>
export type OpenApiDoc = {
  paths: Record<string, Record<string, any>>
  components: { schemas: Record<string, JsonSchema> }
}

export interface Operation {
  readonly method: string
  readonly path: string
  readonly pathParams: ReadonlyArray<string>
  readonly queryParams: ReadonlyArray<{ name: string; schema: JsonSchema }>
  readonly body: JsonSchema | undefined
  readonly contentTypes: ReadonlyArray<string>
  readonly secured: boolean
}

export const operations = (doc: OpenApiDoc): Array<Operation> =>
  Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([m]) => ["get", "post", "put", "patch", "delete"].includes(m))
      .map(([method, op]) => {
        const params: Array<any> = op.parameters ?? []
        const content: Record<string, any> = op.requestBody?.content ?? {}
        return {
          method: method.toUpperCase(),
          path,
          pathParams: params.filter((p) => p.in === "path").map((p) => p.name as string),
          queryParams: params
            .filter((p) => p.in === "query")
            .map((p) => ({ name: p.name as string, schema: p.schema ?? {} })),
          body: content["application/json"]?.schema,
          contentTypes: Object.keys(content),
          secured: Array.isArray(op.security) && op.security.length > 0
        }
      })
  )

/** Resolves `$ref`s (keeping keywords written beside the reference, as Effect's generator emits them). */
export const resolve = (doc: OpenApiDoc, schema: JsonSchema): JsonSchema => {
  let s = schema
  for (let i = 0; i < 20 && typeof s.$ref === "string"; i++) {
    const { $ref, ...rest } = s
    const target = doc.components.schemas[String($ref).replace("#/components/schemas/", "")] ?? {}
    s = { ...target, ...rest }
  }
  return s
}

const ISO = fc
  .date({ min: new Date("1971-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true })
  .map((d) => d.toISOString())

const JSON_LEAF = fc.jsonValue({ maxDepth: 2 })

/** A value the schema accepts (as far as a generator can tell: patterns other than UUIDs are not honoured). */
export const valid = (doc: OpenApiDoc, schema: JsonSchema, name = "", depth = 0): fc.Arbitrary<unknown> => {
  const s = resolve(doc, schema)
  if (depth > 6) return fc.constant(null)
  const alternatives = s.anyOf ?? s.oneOf
  if (Array.isArray(alternatives) && alternatives.length > 0) {
    return fc.oneof(...alternatives.map((a: JsonSchema) => valid(doc, a, name, depth + 1)))
  }
  if (Array.isArray(s.enum) && s.enum.length > 0) return fc.constantFrom(...s.enum)
  if (s.const !== undefined) return fc.constant(s.const)
  switch (s.type) {
    case "string": {
      if (s.format === "uuid" || (typeof s.pattern === "string" && s.pattern.includes("[0-9a-fA-F]{8}")))
        return fc.uuid()
      if (/(_at|^date_|_from|_to)$/.test(name) || s.format === "date-time") return ISO
      const min = s.minLength ?? 0
      const max = Math.max(min, Math.min(s.maxLength ?? 24, 24))
      return fc.string({ minLength: Math.max(min, 1), maxLength: Math.max(max, 1) })
    }
    case "integer": {
      const min = Math.max(s.minimum ?? 0, -1_000_000)
      const max = Math.min(s.maximum ?? 1_000_000, 1_000_000)
      return fc.integer({ min, max: Math.max(min, max) })
    }
    case "number": {
      const min = Math.max(s.minimum ?? 0, -1_000_000)
      const max = Math.min(s.maximum ?? 1_000_000, 1_000_000)
      return fc.double({ min, max: Math.max(min, max), noNaN: true, noDefaultInfinity: true })
    }
    case "boolean":
      return fc.boolean()
    case "null":
      return fc.constant(null)
    case "array": {
      const min = s.minItems ?? 0
      const max = Math.max(min, Math.min(s.maxItems ?? 3, 3))
      const items = s.items ? valid(doc, s.items, name, depth + 1) : JSON_LEAF
      return fc.array(items, { minLength: min, maxLength: max })
    }
    case "object": {
      const properties: Record<string, JsonSchema> = s.properties ?? {}
      const required = new Set<string>(s.required ?? [])
      const keys = Object.keys(properties)
      if (keys.length === 0) return fc.dictionary(fc.string({ maxLength: 8 }), JSON_LEAF, { maxKeys: 3 })
      return fc.record(Object.fromEntries(keys.map((k) => [k, valid(doc, properties[k]!, k, depth + 1)])), {
        requiredKeys: keys.filter((k) => required.has(k))
      })
    }
    default:
      return JSON_LEAF // unknown / any JSON
  }
}

/** A value of the wrong type (or an edge case) for any declared property. */
export const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.constantFrom(-1, -0.5, 1e308, -1e308, 2 ** 53, 2 ** 63, 1e-320, 0),
  fc.string({ maxLength: 30 }),
  fc.constantFrom(
    "",
    " ",
    "NaN",
    "Infinity",
    "-1",
    "1e999",
    "0x10",
    "true",
    "null",
    "2026-13-45T99:99:99Z",
    "\u0000",
    "\ud800",
    "💥".repeat(3)
  ),
  fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  fc.uuid().map((u) => u.toUpperCase())
)

/** A JSON value nested `depth` levels deep (arrays or objects). */
export const nested = (depth: number, leaf: unknown = "x", asObject = false): unknown => {
  let v: unknown = leaf
  for (let i = 0; i < depth; i++) v = asObject ? { k: v } : [v]
  return v
}

/** Edge-case values for a query parameter or a path segment. */
export const edgeScalar: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "-1",
    "0",
    "1",
    "100",
    "101",
    "-0",
    "1.5",
    "1e3",
    "1e309",
    "NaN",
    "Infinity",
    "-Infinity",
    "9".repeat(40),
    "0x10",
    "",
    " ",
    "null",
    "undefined",
    "true",
    "[]",
    "{}",
    "%",
    "%00",
    "%ZZ",
    "%2e%2e%2f",
    "..",
    "sandbox",
    "SANDBOX",
    "pending",
    "completed",
    "failed",
    "2026-01",
    "2026-13",
    "9999-12",
    "0000-00",
    "💥",
    "\u0000"
  ),
  fc.string({ maxLength: 20 }),
  fc.integer({ min: -1_000_000, max: 1_000_000 }).map(String),
  fc.uuid()
)

/** Path ids: non-UUIDs, UUID-like, uppercase UUIDs, percent-encoded junk, very long. */
export const edgePathId: fc.Arbitrary<string> = fc.oneof(
  fc.uuid().map((u) => u.toUpperCase()),
  fc.uuid(),
  fc.uuid().map((u) => u.slice(0, 35)),
  fc.uuid().map((u) => `${u}0`),
  fc.uuid().map((u) => u.replaceAll("-", "")),
  fc.uuid().map((u) => `{${u}}`),
  fc.uuid().map((u) => u.replace(/[0-9a-f]/, "g")),
  fc.constantFrom(
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "null",
    "undefined",
    "0",
    "-1",
    "%00",
    "%ZZ",
    "%",
    "%25",
    "%2F",
    "..%2F..",
    "%E2%82",
    "%C0%AF",
    "a%20b",
    "%F0%9F%92%A5",
    "'%20OR%20'1'%3D'1"
  ),
  fc.integer({ min: 101, max: 5000 }).map((n) => "a".repeat(n)),
  fc.string({ minLength: 1, maxLength: 40 }).map((s) => encodeURIComponent(s)),
  fc
    .uint8Array({ minLength: 1, maxLength: 12 })
    .map((b) => [...b].map((x) => `%${x.toString(16).padStart(2, "0")}`).join(""))
)

/** Fills an OpenAPI path template: `{name}` → the value given for it (already URL-safe), else a random UUID. */
export const fillPath = (path: string, values: Record<string, string>) =>
  path.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] ?? crypto.randomUUID())

/** Runs `tasks` with at most `concurrency` in flight. */
export const pool = async <A>(items: ReadonlyArray<A>, concurrency: number, run: (item: A) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++]!
        await run(item)
      }
    })
  )
}

/** The error body every 4xx and 5xx of the API carries. */
export const isErrorBody = (body: unknown): boolean =>
  typeof body === "object" &&
  body !== null &&
  !Array.isArray(body) &&
  typeof (body as any).error === "string" &&
  (body as any).error.length > 0 &&
  typeof (body as any).code === "string" &&
  (body as any).code.length > 0 &&
  typeof (body as any).retryable === "boolean"
