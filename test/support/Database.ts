import pg from "pg"

/** Where a test's storage lives: a fresh database on TEST_DATABASE_URL's server, or an in-memory PGlite. */
export interface TestDatabase {
  readonly env: Record<string, string>
  readonly backend: "postgresql" | "pglite"
  readonly drop: () => Promise<void>
}

export const backendName = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"

/** A new, empty database: each test file gets its own, so files never see each other's rows. */
export const createTestDatabase = async (): Promise<TestDatabase> => {
  const base = process.env.TEST_DATABASE_URL
  if (!base) return { env: { TAPEDECK_DATA_DIR: "memory://" }, backend: "pglite", drop: async () => {} }
  const name = `tapedeck_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`
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
