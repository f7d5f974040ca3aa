import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Exit, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AppConfig } from "#layers/config/AppConfig"
import * as PgliteClient from "#layers/storage/PgliteClient"

const sharedBuffers = (options: { readonly dataDir: string; readonly sharedBuffers?: string }) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ shared_buffers: string }>`SHOW shared_buffers`).pipe(
      Effect.map((rows) => rows[0]!.shared_buffers),
      Effect.provide(PgliteClient.layer(options)),
      Effect.scoped
    )
  )

describe("embedded PGlite's buffer cache (TAPEDECK_PGLITE_SHARED_BUFFERS)", () => {
  test("a database on disk gets the larger default; an in-memory one PGlite's own; a set value wins", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tapedeck-pglite-buffers-"))
    try {
      expect(await sharedBuffers({ dataDir: dir })).toBe(PgliteClient.DEFAULT_SHARED_BUFFERS)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    expect(await sharedBuffers({ dataDir: "memory://" })).toBe("128MB")
    expect(await sharedBuffers({ dataDir: "memory://", sharedBuffers: "64MB" })).toBe("64MB")
  }, 60_000)

  test("a value that is not a size is refused at start", async () => {
    const load = (value: string) =>
      Effect.runPromiseExit(
        AppConfig.pipe(
          Effect.provide(
            AppConfig.Default.pipe(
              Layer.provide(
                Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["TAPEDECK_PGLITE_SHARED_BUFFERS", value]])))
              )
            )
          )
        )
      )
    for (const bad of ["lots", "256", "0MB", "256mb", "-1GB", "1TB"]) expect(Exit.isFailure(await load(bad))).toBe(true)
    const good = await load("512MB")
    expect(Exit.isSuccess(good) ? Option.getOrUndefined(good.value.pgliteSharedBuffers) : undefined).toBe("512MB")
  })
})
