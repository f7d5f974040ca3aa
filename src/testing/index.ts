/**
 * Tapedeck's test kit for extensions (docs/extensions.md): the real server, with extensions composed in, over a
 * fresh database (in-memory PGlite, or a new database on TEST_DATABASE_URL's PostgreSQL server), and fast-check
 * arbitraries derived from the API's schemas.
 */
import { HttpServer } from "@effect/platform"
import { BunContext, BunHttpServer } from "@effect/platform-bun"
import {
  Arbitrary,
  ConfigProvider,
  type FastCheck as fc,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  Schema
} from "effect"
import pg from "pg"
import { StorageLive } from "#layers/storage/Sql"
import { AppLive } from "../app/AppLive.ts"
import { type Extension, extend } from "../index.ts"
import { Span } from "../domain/Span.ts"

export interface TestServerOptions {
  /** Extensions composed into the server, in order (see `extend`). */
  readonly extensions?: ReadonlyArray<Extension<unknown>>
  /** Configuration (docs/configuration.md) beside the kit's: two accounts' API keys, a fast job poll. */
  readonly env?: Readonly<Record<string, string>>
}

export interface TestServer {
  readonly url: string
  readonly backend: "pglite" | "postgresql"
  /** The API keys of the two accounts the server starts with, "acme" and "globex". */
  readonly keys: { readonly acme: string; readonly globex: string }
  /**
   * A request with the acme key unless `key` says otherwise (`null`: no key). A body that is not a string or bytes
   * is sent as JSON.
   */
  readonly request: (
    method: string,
    path: string,
    options?: { readonly key?: string | null; readonly body?: unknown; readonly headers?: Record<string, string> }
  ) => Promise<Response>
  readonly stop: () => Promise<void>
}

const KEYS = { acme: "svc_kit_key_acme_0001", globex: "svc_kit_key_globex_0002" } as const

/** A new empty database for the caller to pass in `env` to several servers in turn (`drop` when done). */
export const freshDatabase = async (): Promise<{
  env: Record<string, string>
  backend: TestServer["backend"]
  drop: () => Promise<void>
}> => {
  const base = process.env.TEST_DATABASE_URL
  if (!base) return { env: { TAPEDECK_DATA_DIR: "memory://" }, backend: "pglite", drop: async () => {} }
  const name = `tapedeck_kit_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(base)
  url.pathname = `/${name}`
  return {
    env: { DATABASE_URL: url.toString() },
    backend: "postgresql",
    drop: async () => {
      const client = new pg.Client({ connectionString: base })
      await client.connect()
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await client.end()
    }
  }
}

/** The real application on Bun's HTTP server (an ephemeral port) with the extensions composed in. */
export const startServer = async (options: TestServerOptions = {}): Promise<TestServer> => {
  // A database named in `env` is the caller's (a restart over the same data): it is neither created nor dropped.
  const own = options.env?.DATABASE_URL !== undefined || options.env?.TAPEDECK_DATA_DIR !== undefined
  const database = own
    ? {
        env: {},
        backend: options.env?.DATABASE_URL ? ("postgresql" as const) : ("pglite" as const),
        drop: async () => {}
      }
    : await freshDatabase()
  const env = {
    TAPEDECK_API_KEYS: `acme=${KEYS.acme},globex=${KEYS.globex}`,
    TAPEDECK_JOB_POLL_MS: "50",
    ...database.env,
    ...options.env
  }
  const app = AppLive.pipe(Layer.provideMerge(StorageLive))
  const layer = extend(...(options.extensions ?? []))(app).pipe(
    Layer.provideMerge(BunHttpServer.layer({ port: 0, hostname: "127.0.0.1" })),
    Layer.provide(BunContext.layer),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )
  const runtime = ManagedRuntime.make(layer)
  const server = await runtime.runPromise(HttpServer.HttpServer).catch(async (e) => {
    await runtime.dispose()
    await database.drop()
    throw e
  })
  const url = `http://127.0.0.1:${(server.address as HttpServer.TcpAddress).port}`
  const request: TestServer["request"] = (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers }
    const key = opts.key === undefined ? KEYS.acme : opts.key
    if (key !== null) headers["x-service-key"] = key
    let body: string | Uint8Array | undefined
    if (opts.body instanceof Uint8Array) body = opts.body
    else if (opts.body !== undefined) {
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body)
      headers["content-type"] ??= "application/json"
    }
    return fetch(url + path, { method, headers, ...(body === undefined ? {} : { body }) })
  }
  return {
    url,
    backend: database.backend,
    keys: KEYS,
    request,
    stop: async () => {
      await runtime.dispose()
      await database.drop()
    }
  }
}

/** Spans as the API takes them (JSON), generated from the Span schema. */
export const spanArbitrary: fc.Arbitrary<typeof Span.Encoded> = Arbitrary.make(Span).map(Schema.encodeSync(Span))
