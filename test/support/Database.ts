import { freshDatabase } from "#src/testing/index"

/** Where a test's storage lives: a fresh database on TEST_DATABASE_URL's server, or an in-memory PGlite. */
export interface TestDatabase {
  readonly env: Record<string, string>
  readonly backend: "postgresql" | "pglite"
  readonly drop: () => Promise<void>
}

export const backendName = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"

/** A new, empty database: each test file gets its own, so files never see each other's rows (the test kit's). */
export const createTestDatabase = (): Promise<TestDatabase> => freshDatabase()
