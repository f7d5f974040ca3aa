import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { HttpApiSchema } from "@effect/platform"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Arbitrary, FastCheck as fc, Schema } from "effect"
import * as ApiErrors from "#src/api/ApiErrors"
import { type ApiError, errorBody, statusOf } from "#src/api/ApiErrors"
import { errorTable, type ErrorTableOf, toApiError } from "#src/api/ErrorTable"
import type { DomainError } from "#src/domain/DomainError"
import * as Errors from "#src/domain/Errors"
import { describeFailure } from "#src/mcp/ProductTools"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

// Compile-time: `tsc --noEmit -p .` checks these lines; each @ts-expect-error fails the typecheck if its line compiles.
class NewlyDeclared extends Schema.TaggedError<NewlyDeclared>()("NewlyDeclared", { what: Schema.String }) {}
// @ts-expect-error a domain error without an entry: the table no longer compiles
const _withNewError: ErrorTableOf<DomainError | NewlyDeclared> = errorTable
const { TraceNotFound: _dropped, ...withoutTraceNotFound } = errorTable
// @ts-expect-error a table missing one entry is not a table
const _incomplete: ErrorTableOf<DomainError> = withoutTraceNotFound
const forkEntry = (e: Errors.ForkNotFound) => toApiError(e)
// @ts-expect-error each entry takes the error of its own tag
const _mismatched: ErrorTableOf<DomainError> = { ...errorTable, TraceNotFound: forkEntry }
type Probe<A> = <T>() => T extends A ? 1 : 2
type Equal<A, B> = Probe<A> extends Probe<B> ? true : false
// Every export of Errors.ts (named as its tag, checked below) has its entry, and nothing else has one.
const _exact: Equal<keyof typeof Errors, keyof typeof errorTable> = true

/** The codec HttpApi endpoints encode each API error with (the REST answer). */
const restCodec = (e: ApiError) => {
  const codec = (ApiErrors as unknown as Record<string, Schema.Schema<ApiError, unknown>>)[`${e._tag}Wire`]
  if (codec === undefined) throw new Error(`no HttpApi codec for ${e._tag}`)
  return codec
}

/** Any domain error, of any class of Errors.ts, with arbitrary fields. */
const anyDomainError: fc.Arbitrary<DomainError> = fc.oneof(
  ...Object.values(Errors).map((ErrorClass) => Arbitrary.make(ErrorClass as unknown as Schema.Schema<DomainError>))
)

describe("the error table", () => {
  test("every class of Errors.ts is keyed by its own tag", () => {
    for (const [name, ErrorClass] of Object.entries(Errors)) {
      const sample = fc.sample(Arbitrary.make(ErrorClass as unknown as Schema.Schema<DomainError>), 1)[0]!
      expect(sample._tag).toBe(name as DomainError["_tag"])
      expect(Object.hasOwn(errorTable, sample._tag)).toBe(true)
    }
  })

  test("property: MCP's tool error and REST's body and status are the same for every domain error", () => {
    fc.assert(
      fc.property(anyDomainError, (e) => {
        const apiError = toApiError(e)
        const mcp = describeFailure(e)
        expect(mcp.isError).toBe(true)
        const mcpBody = JSON.parse((mcp.content[0] as { text: string }).text)
        const codec = restCodec(apiError)
        expect(mcpBody).toEqual(Schema.encodeSync(codec)(apiError))
        expect(mcpBody).toEqual(errorBody(apiError))
        expect(HttpApiSchema.getStatusError(codec)).toBe(statusOf(apiError))
        expect(Object.keys(mcpBody).sort()).toEqual(["code", "error", "retryable"])
      }),
      { numRuns: 300 }
    )
  })

  test("a failure no route answers as the caller's is internal and says nothing of itself", () => {
    for (const e of [
      new Errors.ReplayFailed({ reason: "secret detail", modelWork: true }),
      new Errors.DataDirInUse({ dataDir: "/var/lib/x", pid: 12 }),
      new Errors.LlmUnavailable({ reason: "network", message: "secret detail" })
    ]) {
      expect(errorBody(toApiError(e))).toEqual({ error: "internal error", code: "internal", retryable: true })
    }
  })
})

describe("REST, batch and MCP answer a domain error alike (through the server)", () => {
  let server: TestServer
  let mcp: Client
  beforeAll(async () => {
    server = await startTestServer()
    mcp = new Client({ name: "tapedeck-test", version: "1.0.0" })
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { "x-service-key": KEY_A } }
      })
    )
  }, 60_000)
  afterAll(async () => {
    await mcp.close().catch(() => {})
    await server.stop()
  }, 60_000)

  const tool = async (name: string, args: Record<string, unknown>) => {
    const result = (await mcp.callTool({ name, arguments: args })) as {
      isError?: boolean
      content: Array<{ text: string }>
    }
    expect(result.isError).toBe(true)
    return JSON.parse(result.content[0]!.text)
  }
  const rest = async (method: "GET" | "POST", path: string, body?: unknown) => {
    const response = await server.request(method, path, { key: KEY_A, ...(body === undefined ? {} : { body }) })
    return { status: response.status, body: await response.json() }
  }
  const batched = async (method: "GET" | "POST", path: string, body?: unknown) => {
    const response = await server.post(
      "/api/v1/batch",
      { operations: [{ method, path, ...(body === undefined ? {} : { body }) }] },
      KEY_A
    )
    expect(response.status).toBe(200)
    return ((await response.json()) as { results: Array<{ status: number; body: unknown }> }).results[0]!
  }

  test("property: missing trace, fork, evaluation and hold; a forged cursor", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uuid({ version: 4 }), fc.uuid({ version: 4 }), async (id, other) => {
        const cases: Array<{
          expected: ApiError
          method: "GET" | "POST"
          path: string
          body?: unknown
          tool: string
          args: Record<string, unknown>
        }> = [
          {
            expected: toApiError(new Errors.TraceNotFound({ traceId: id as never })),
            method: "GET",
            path: `/api/v1/traces/${id}`,
            tool: "get_trace",
            args: { trace_id: id }
          },
          {
            expected: toApiError(new Errors.TraceNotFound({ traceId: id as never })),
            method: "POST",
            path: "/api/v1/forks",
            body: { trace_id: id, fork_point_span_id: other, modified_input: "x" },
            tool: "create_fork",
            args: { trace_id: id, fork_point_span_id: other, modified_input: "x" }
          },
          {
            expected: toApiError(new Errors.ForkNotFound({ forkId: id as never })),
            method: "POST",
            path: `/api/v1/forks/${id}/replay`,
            tool: "replay_fork",
            args: { fork_id: id }
          },
          {
            expected: toApiError(new Errors.EvaluationNotFound({ evaluationId: id as never })),
            method: "POST",
            path: `/api/v1/evaluations/${id}/run`,
            body: { trace_ids: [other] },
            tool: "run_evaluation",
            args: { evaluation_id: id, trace_ids: [other] }
          },
          {
            expected: toApiError(new Errors.HoldNotFound({ id })),
            method: "POST",
            path: `/api/v1/enforcement/holds/${id}/approve`,
            body: {},
            tool: "approve_hold",
            args: { hold_id: id }
          },
          {
            expected: toApiError(new Errors.InvalidCursor()),
            method: "GET",
            path: `/api/v1/traces?cursor=forged${id.slice(0, 8)}`,
            tool: "list_traces",
            args: { cursor: `forged${id.slice(0, 8)}` }
          }
        ]
        for (const c of cases) {
          const wire = { status: statusOf(c.expected), body: errorBody(c.expected) }
          expect({ path: c.path, ...(await rest(c.method, c.path, c.body)) }).toEqual({ path: c.path, ...wire })
          expect({ path: c.path, ...(await batched(c.method, c.path, c.body)) }).toEqual({ path: c.path, ...wire })
          expect({ tool: c.tool, body: await tool(c.tool, c.args) }).toEqual({ tool: c.tool, body: wire.body })
        }
      }),
      { numRuns: 3 }
    )
  }, 120_000)
})
