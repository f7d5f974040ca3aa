import { RateLimiter } from "@effect/experimental"
import { FileSystem, HttpApiBuilder, HttpServerRequest, HttpServerResponse, OpenApi } from "@effect/platform"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { Effect, Either, Layer, Option, Runtime } from "effect"
import { z } from "zod"
import { Credentials, type Principal } from "#layers/auth/Credentials"
import { AppConfig } from "#layers/config/AppConfig"
import { makeDocsIndex } from "#src/mcp/DocsIndex"
import { type ProductServices, registerProductTools, type Runner } from "#src/mcp/ProductTools"
import { TapedeckApi } from "../api/Api.ts"
import {
  errorBody,
  internalError,
  MethodNotAllowed,
  missingCredentials,
  NotFound,
  rateLimited,
  RequestTimeout,
  ValidationFailed
} from "../api/ApiErrors.ts"
import { type BodyPace, bodyPaceOf, BodyTimedOut, BodyTooDeep, BodyTooLarge, limitBody } from "./BodyLimit.ts"
import { publicBase } from "./DiscoveryHttp.ts"
import { errorResponse } from "./ErrorBodies.ts"
import { headerCredential } from "./HeaderCredentials.ts"
import { retryAfterSeconds } from "./RateLimitLive.ts"
import pkg from "../../package.json" with { type: "json" }

/** The caller of /mcp: `x-service-key`, or `Authorization: Bearer` (API key or JWT), as on every API route. */
const authenticate = (credentials: Credentials, request: HttpServerRequest.HttpServerRequest) =>
  Option.match(headerCredential(credentials, request), {
    onNone: () => Effect.succeed(Option.none<Principal>()),
    onSome: Effect.option
  })

/**
 * One MCP exchange in stateless mode: a fresh server and transport per HTTP request (any instance can answer
 * any request; nothing is kept between requests), JSON responses rather than SSE streams.
 */
const exchange = (
  request: HttpServerRequest.HttpServerRequest,
  name: string,
  configure: (server: McpServer) => void,
  parsedBody?: unknown
) =>
  Effect.gen(function*() {
    const web = yield* HttpServerRequest.toWeb(request)
    const response = yield* Effect.promise(async () => {
      const server = new McpServer({ name, version: pkg.version })
      configure(server)
      const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true }) // no sessionIdGenerator: stateless
      await server.connect(transport)
      try {
        return await transport.handleRequest(web, parsedBody === undefined ? undefined : { parsedBody })
      } finally {
        await server.close()
      }
    })
    return HttpServerResponse.fromWeb(response)
  })

/**
 * The JSON-RPC body of a /mcp request, read under the API's body limits (size, nesting): the parsed messages,
 * or the 400 the API would answer.
 */
const readBody = (request: HttpServerRequest.HttpServerRequest, maxBytes: number, pace: BodyPace) =>
  limitBody(request, maxBytes, pace).pipe(
    Effect.flatMap((limited) => limited.json),
    Effect.mapError((e) =>
      e._tag !== "ValidationFailed" && e.cause instanceof BodyTimedOut
        ? errorResponse(new RequestTimeout({ message: e.cause.message }), { connection: "close" })
        : errorResponse(new ValidationFailed({
          message: e._tag === "ValidationFailed"
            ? e.message
            : e.cause instanceof BodyTooLarge || e.cause instanceof BodyTooDeep
            ? e.cause.message
            : "request body is not valid JSON"
        }))
    ),
    Effect.either
  )

const onlyPost = (request: HttpServerRequest.HttpServerRequest) =>
  request.method === "POST"
    ? Option.none()
    : Option.some(errorResponse(
      new MethodNotAllowed({ message: "this MCP endpoint is stateless: send JSON-RPC messages with POST" }),
      { allow: "POST" }
    ))

const repositoryFile = (path: string) => new URL(`../../${path}`, import.meta.url).pathname

/** README.md, then every page of docs/ in name order, as one Markdown text (sections are ## and ### headings). */
const readGuide = (fs: FileSystem.FileSystem) =>
  Effect.gen(function*() {
    const pages = (yield* fs.readDirectory(repositoryFile("docs")).pipe(Effect.orElseSucceed(() => [] as Array<string>)))
      .filter((name) => name.endsWith(".md"))
      .sort()
      .map((name) => `docs/${name}`)
    const texts = yield* Effect.forEach(["README.md", ...pages], (path) =>
      fs.readFileString(repositoryFile(path)).pipe(
        Effect.tapError(() => Effect.logWarning(`${path} not found: /mcp/docs serves the rest of the reference`)),
        Effect.orElseSucceed(() => "")
      ))
    return texts.join("\n")
  })

/**
 * POST /mcp: the product MCP endpoint (Streamable HTTP), authenticated like the API; its tools act for the
 * caller's account through the same services as the REST routes. POST /mcp/docs: the public documentation
 * MCP endpoint over the OpenAPI document and the guide (README.md and the pages of docs/).
 */
export const McpHttpLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const limiter = yield* RateLimiter.RateLimiter
    const config = yield* AppConfig
    const { maxBodyBytes, rateLimitPerMinute } = config
    const pace = bodyPaceOf(config)
    const runtime = yield* Effect.runtime<ProductServices>()
    const run: Runner = (effect) => Runtime.runPromiseExit(runtime)(effect)

    const fs = yield* Effect.serviceOption(FileSystem.FileSystem)
    const guide = Option.isNone(fs) ? "" : yield* readGuide(fs.value)
    const docs = makeDocsIndex(OpenApi.fromApi(TapedeckApi), guide)

    const product = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const principal = yield* authenticate(credentials, request)
      if (Option.isNone(principal)) {
        return errorResponse(missingCredentials(), {
          "www-authenticate": `Bearer resource_metadata="${publicBase(config, request)}/.well-known/oauth-protected-resource"`
        })
      }
      const refused = onlyPost(request)
      if (Option.isSome(refused)) return refused.value
      const body = yield* readBody(request, maxBodyBytes, pace)
      if (Either.isLeft(body)) return body.left
      // The API's per-credential, per-route limit; each message of a JSON-RPC batch counts (a batch of more
      // messages than the limit can never pass).
      const exceeded = yield* limiter.consume({
        key: `${principal.value.credentialId}:POST /mcp`,
        limit: rateLimitPerMinute,
        window: "1 minute",
        onExceeded: "fail",
        tokens: Array.isArray(body.right) ? Math.max(1, body.right.length) : 1
      }).pipe(
        Effect.as(Option.none<number>()),
        Effect.catchTag("RateLimiterError", (e) =>
          Effect.succeed(Option.some(e.reason === "Exceeded" ? retryAfterSeconds(e.retryAfter) : 1)))
      )
      if (Option.isSome(exceeded)) {
        const seconds = exceeded.value
        return errorResponse(rateLimited(seconds), { "retry-after": String(seconds) })
      }
      return yield* exchange(request, "tapedeck", (server) => registerProductTools(server, run, principal.value), body.right)
    })

    const documentation = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const refused = onlyPost(request)
      if (Option.isSome(refused)) return refused.value
      // Public: its body is held to the same size, nesting and pace as every other.
      const body = yield* readBody(request, maxBodyBytes, pace)
      if (Either.isLeft(body)) return body.left
      return yield* exchange(request, "tapedeck-docs", (server) => {
        server.registerTool("search_docs", {
          title: "Search the Tapedeck API reference",
          description: "Full-text search over the API's operations (from the OpenAPI document), its schemas and the README's guide sections. Returns ids to read with read_doc.",
          inputSchema: z.object({
            query: z.string().min(1).max(500),
            limit: z.number().int().min(1).max(50).optional().describe("default 8")
          }).strict(),
          annotations: { readOnlyHint: true }
        }, async (args) => ({
          content: [{ type: "text", text: JSON.stringify(docs.search(args.query, args.limit ?? 8), null, 2) }]
        }))
        server.registerTool("read_doc", {
          title: "Read a part of the Tapedeck API reference",
          description: "One entry by id (\"GET /api/v1/traces\", \"schema:CreateTraceRequest\", \"readme:live-span-stream\"), by path (\"/api/v1/traces\": every method) or by section title.",
          inputSchema: z.object({ id: z.string().min(1).max(500) }).strict(),
          annotations: { readOnlyHint: true }
        }, async (args) => {
          const found = docs.read(args.id)
          if (found.length === 0) {
            const suggestions = docs.search(args.id, 5).map((s) => s.id)
            return {
              isError: true,
              content: [{
                type: "text",
                text: JSON.stringify({ ...errorBody(new NotFound({ message: `no documentation entry ${JSON.stringify(args.id)}` })), suggestions })
              }]
            }
          }
          return { content: [{ type: "text", text: found.map((e) => e.text).join("\n\n").slice(0, 100_000) }] }
        })
        server.registerTool("list_docs", {
          title: "Table of contents",
          description: "Every operation and guide section (ids and titles); schemas are listed by name.",
          inputSchema: z.object({}).strict(),
          annotations: { readOnlyHint: true }
        }, async () => ({
          content: [{
            type: "text",
            text: JSON.stringify({
              operations: docs.entries.filter((e) => e.kind === "operation").map((e) => e.title),
              guides: docs.entries.filter((e) => e.kind === "guide").map((e) => ({ id: e.id, title: e.title })),
              schemas: docs.entries.filter((e) => e.kind === "schema").map((e) => e.id)
            }, null, 2)
          }]
        }))
      }, body.right)
    })

    const guarded = <E, R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
      effect.pipe(
        Effect.catchAllCause((cause) =>
          Effect.logError("MCP request failed", cause).pipe(Effect.as(errorResponse(internalError())))
        )
      )
    yield* router.all("/mcp", guarded(product))
    yield* router.all("/mcp/docs", guarded(documentation))
  })
).pipe(Layer.provide(RateLimiter.layer), Layer.provide(RateLimiter.layerStoreMemory))
