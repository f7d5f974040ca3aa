import { HttpServer } from "@effect/platform"
import { BunContext, BunHttpServer } from "@effect/platform-bun"
import type { SqlClient } from "@effect/sql"
import { ConfigProvider, type Effect, Layer, Logger, LogLevel, ManagedRuntime, Option } from "effect"
import type { AppConfig } from "#layers/config/AppConfig"
import { StorageLive } from "#layers/storage/Sql"
import { AppLive } from "#src/app/AppLive"
import { OtlpGrpcLive, OtlpGrpcServer } from "#src/grpc/OtlpGrpc"
import { createTestDatabase } from "./Database.ts"

export const KEY_A = "svc_test_key_acme_0001"
export const KEY_B = "svc_test_key_globex_0002"
export const DEFAULT_ENV = {
  TAPEDECK_API_KEYS: `acme=${KEY_A},globex=${KEY_B}`,
  TAPEDECK_JOB_POLL_MS: "50",
  // OTLP/gRPC only where a test asks for it (GRPC_ENV): an ephemeral loopback port then.
  TAPEDECK_OTLP_GRPC_ENABLED: "false"
}

/** The environment that serves OTLP/gRPC on an ephemeral loopback port (`TestServer.grpcPort`). */
export const GRPC_ENV = { TAPEDECK_OTLP_GRPC_ENABLED: "true", TAPEDECK_OTLP_GRPC_PORT: "0", HOST: "127.0.0.1" }

export interface TestServer {
  readonly url: string
  /** The OTLP/gRPC port, when the server was started with GRPC_ENV. */
  readonly grpcPort: number | undefined
  /** The environment the server was configured with (DATABASE_URL shows which database it uses). */
  readonly env: Readonly<Record<string, string>>
  readonly request: (method: string, path: string, options?: { key?: string | null | undefined; body?: unknown; headers?: Record<string, string> }) => Promise<Response>
  readonly get: (path: string, key?: string | null) => Promise<Response>
  readonly post: (path: string, body: unknown, key?: string | null) => Promise<Response>
  /** Runs an effect against the server's own storage and configuration. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | AppConfig>) => Promise<A>
  readonly stop: () => Promise<void>
}

/** The real application on Bun's HTTP server (an ephemeral port), over a fresh database. */
export const startTestServer = async (env: Record<string, string> = {}): Promise<TestServer> => {
  const database = await createTestDatabase()
  const fullEnv = { ...DEFAULT_ENV, ...database.env, ...env }
  const config = ConfigProvider.fromMap(new Map(Object.entries(fullEnv)))
  const layer = Layer.merge(AppLive, OtlpGrpcLive).pipe(
    Layer.provideMerge(StorageLive),
    Layer.provideMerge(BunHttpServer.layer({ port: 0, hostname: "127.0.0.1" })),
    Layer.provide(BunContext.layer),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
    Layer.provide(Layer.setConfigProvider(config))
  )
  const runtime = ManagedRuntime.make(layer)
  const server = await runtime.runPromise(HttpServer.HttpServer).catch(async (e) => {
    await runtime.dispose()
    await database.drop()
    throw e
  })
  const address = server.address as HttpServer.TcpAddress
  const grpcPort = Option.getOrUndefined((await runtime.runPromise(OtlpGrpcServer)).port)
  const url = `http://127.0.0.1:${address.port}`
  const request: TestServer["request"] = (method, path, options = {}) => {
    const headers: Record<string, string> = { ...options.headers }
    const key = options.key === undefined ? KEY_A : options.key
    if (key !== null) headers["x-service-key"] = key
    let body: string | undefined
    if (options.body !== undefined) {
      body = typeof options.body === "string" ? options.body : JSON.stringify(options.body)
      headers["content-type"] ??= "application/json"
    }
    return fetch(url + path, { method, headers, ...(body === undefined ? {} : { body }) })
  }
  return {
    url,
    grpcPort,
    env: fullEnv,
    request,
    get: (path, key) => request("GET", path, { key }),
    post: (path, body, key) => request("POST", path, { key, body }),
    run: (effect) => runtime.runPromise(effect),
    stop: async () => {
      await runtime.dispose()
      await database.drop()
    }
  }
}
