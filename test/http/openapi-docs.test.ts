import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Either, Option, Schema } from "effect"
import { TapedeckApi } from "#src/api/Api"
import { decodeOtlpJson } from "#layers/ingest/OtlpDecode"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

// The API reference (/docs, from /openapi.json) teaches: every operation says what it does, and every request
// body comes with an example that is valid — for its own schema, and for the running server.
let server: TestServer
let spec: any
beforeAll(async () => {
  server = await startTestServer()
  spec = await (await server.get("/openapi.json", null)).json()
})
afterAll(() => server.stop())

interface Operation {
  readonly id: string
  readonly method: string
  readonly path: string
  readonly op: any
}

const operations = (): Array<Operation> =>
  Object.entries<any>(spec.paths).flatMap(([path, item]) =>
    Object.entries<any>(item).map(([method, op]) => ({ id: op.operationId, method: method.toUpperCase(), path, op }))
  )

const resolve = (schema: any): any =>
  schema?.$ref === undefined
    ? schema
    : resolve(spec.components.schemas[schema.$ref.replace("#/components/schemas/", "")])

/** The contract's payload schema of each operation, by operationId (group.endpoint). */
const payloadSchemas = new Map<string, Schema.Schema.AnyNoContext>()
for (const group of Object.values(TapedeckApi.groups) as Array<any>) {
  for (const endpoint of Object.values(group.endpoints) as Array<any>) {
    if (Option.isSome(endpoint.payloadSchema))
      payloadSchemas.set(`${group.identifier}.${endpoint.name}`, endpoint.payloadSchema.value)
  }
}

/** A schema's examples; a union's are its members' (each policy type of a guardrail shows its own). */
const examplesIn = (schema: any): Array<unknown> => {
  const resolved = resolve(schema)
  if (resolved === undefined) return []
  return [...(resolved.examples ?? []), ...(resolved.anyOf ?? []).flatMap(examplesIn)]
}
const examplesOf = (op: any): Array<unknown> => examplesIn(op.requestBody?.content?.["application/json"]?.schema)

describe("/openapi.json", () => {
  test("the introduction's quickstart works as written: a trace recorded and read back, its cost estimated", async () => {
    const script = /```sh\n([\s\S]*?)```/.exec(spec.info.description)?.[1]
    if (script === undefined) throw new Error("no sh block in the introduction")
    // The one line a reader edits: where the server is and the key it printed.
    const lines = script
      .split("\n")
      .map((line) => (line.startsWith("export U=") ? `export U=${server.url} K=${KEY_A}` : line))
    // Not spawnSync: the server answering curl runs on this thread.
    const run = Bun.spawn(["bash", "-euo", "pipefail", "-c", lines.join("\n")], { stdout: "pipe", stderr: "pipe" })
    const [stdout, stderr] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text()])
    expect(stderr).toBe("")
    expect(await run.exited).toBe(0)
    const [created, detail] = stdout
      .replace("}{", "}\n{")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
    expect(created).toMatchObject({ status: "created" })
    expect(detail).toMatchObject({ id: created.id, name: "hello", status: "completed" })
    expect(detail.spans[0]).toMatchObject({
      model: "gpt-4o-mini",
      cost: (12 * 0.15 + 5 * 0.6) / 1e6,
      cost_estimated: true
    })
  })

  test("every operation has a summary and a description; the API has an introduction with a quickstart and authentication", () => {
    const ops = operations()
    expect(ops.length).toBeGreaterThanOrEqual(47)
    const missing = ops.filter(({ op }) => !(op.summary?.trim() && op.description?.trim())).map((o) => o.id)
    expect(missing).toEqual([])
    const intro: string = spec.info.description
    expect(intro).toContain("## Quickstart")
    expect(intro).toContain("## Authentication")
    expect(intro).toContain("x-service-key")
  })

  test("every JSON request body has examples, and each decodes with the operation's own schema", () => {
    const withBody = operations().filter(({ op }) => op.requestBody?.content?.["application/json"] !== undefined)
    expect(withBody.length).toBeGreaterThanOrEqual(17)
    // Annotating a schema with examples keeps its name: request bodies stay models of their own in the reference.
    for (const id of ["traces.create", "forks.create", "search.search"]) {
      expect(withBody.find((o) => o.id === id)!.op.requestBody.content["application/json"].schema.$ref).toBeString()
    }
    for (const { id, op } of withBody) {
      const examples = examplesOf(op)
      if (examples.length === 0) throw new Error(`${id}: no request example`)
      for (const example of examples) {
        if (id === "otlp.export" || id === "langfuseOtlp.export") {
          expect(Either.isRight(decodeOtlpJson(example))).toBe(true)
          continue
        }
        const schema = payloadSchemas.get(id)
        if (schema === undefined) throw new Error(`${id}: no payload schema in the contract`)
        const decoded = Schema.decodeUnknownEither(schema)(example)
        if (Either.isLeft(decoded)) throw new Error(`${id}: example does not decode: ${decoded.left.message}`)
      }
    }
  })

  test("every property of every model has a human description, none generated from its validation", () => {
    // What the generator writes from a schema's checks: "a string at most 500 character(s) long", "a number between…".
    const generated =
      /character\(s\)|item\(s\)|^a string|^an? (number|integer|boolean|array|object|non-negative|positive|finite)\b/i
    // The platform's own decode-error model, not ours to annotate.
    const platform = new Set(["HttpApiDecodeError", "Issue", "PropertyKey"])
    const described = (text: unknown) => typeof text === "string" && text.trim() !== "" && !generated.test(text)
    const problems: Array<string> = []
    const check = (schema: any, where: string) => {
      for (const [name, property] of Object.entries<any>(schema.properties ?? {})) {
        // A bare reference is a named model shared by many fields, described once on the model itself.
        const ownText =
          property.$ref !== undefined && property.description === undefined
            ? resolve(property).description
            : property.description
        if (!described(ownText)) problems.push(`${where}.${name}: ${ownText ?? "(no description)"}`)
        if (property.properties !== undefined) check(property, `${where}.${name}`)
      }
      for (const member of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) {
        if (member.$ref === undefined) check(member, where)
      }
    }
    for (const [name, schema] of Object.entries<any>(spec.components.schemas)) {
      if (!platform.has(name)) check(schema, name)
    }
    expect(problems).toEqual([])
  })

  test("the server accepts each request example (created records feed the examples that refer to them)", async () => {
    // Path parameters: the example trace's id, and the ids the server gives to what the examples create.
    const traceExample = examplesOf(operations().find((o) => o.id === "traces.create")!.op)[0] as { id: string }
    const ids: Record<string, string> = { traceId: traceExample.id }
    // The trace is finished last: spans can only be appended while it runs.
    const ordered = operations().sort((a, b) => Number(a.id === "traces.finish") - Number(b.id === "traces.finish"))
    const statuses: Record<string, number> = {}
    for (const { id, method, path, op } of ordered) {
      for (const example of examplesOf(op)) {
        const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!)
        // An id nothing created here (a hold) is a random one: the body must still pass validation (404, not 400).
        const url = path.replace(/\{(\w+)\}/g, (_, name: string) => ids[name] ?? crypto.randomUUID())
        // OTLP exports yield to enforcement checks still in progress (503, retryable): retried as exporters do.
        let response = await server.request(method, url, { body: example })
        for (let tries = 0; response.status === 503 && tries < 10; tries++) {
          await Bun.sleep(Number(response.headers.get("retry-after") ?? 1) * 1000)
          response = await server.request(method, url, { body: example })
        }
        statuses[`${id}${params.length > 0 && params.some((p) => ids[p] === undefined) ? " (unknown id)" : ""}`] =
          response.status
        const body = (await response.json()) as any
        if (id === "evaluations.create") ids.evaluationId = body.id
        if (id === "enforcement.createGuardrail" && ids.id === undefined) ids.id = body.id
      }
    }
    // Validation never refuses an example, nothing fails, and what can be accepted here is.
    for (const [id, status] of Object.entries(statuses)) {
      if (status === 400 || status >= 500) throw new Error(`${id}: ${status}`)
    }
    const accepted = [
      "traces.create",
      "traces.appendSpans",
      "traces.finish",
      "forks.create",
      "enforcement.check",
      "enforcement.createGuardrail",
      "enforcement.updateGuardrail",
      "batch.run",
      "apiKeys.create",
      "otlp.export",
      "evaluations.create",
      "search.search"
    ]
    for (const id of accepted) expect([id, statuses[id]]).toEqual([id, 200])
  })
})
