import { expect, test } from "bun:test"
import { readFileSync } from "node:fs"

// `docker compose config` cannot run on this machine (no compose plugin, no engine), so the file is
// parsed and its wiring checked here.
test("docker-compose.yml wires the API to PostgreSQL with pgvector, with health checks", () => {
  const compose = Bun.YAML.parse(readFileSync(new URL("../docker-compose.yml", import.meta.url), "utf8")) as any
  const { api, db } = compose.services
  expect(api.build).toBe(".")
  expect(api.environment.DATABASE_URL).toMatch(/^postgres:\/\/tapedeck:tapedeck@db:5432\/tapedeck$/)
  expect(api.depends_on.db.condition).toBe("service_healthy")
  expect(api.healthcheck.test.join(" ")).toContain("/health")
  expect(db.image).toMatch(/^pgvector\/pgvector:/)
  expect(db.healthcheck.test.join(" ")).toContain("pg_isready")
  expect(Object.keys(compose.volumes)).toEqual(["tapedeck-db"])
})

test("the Dockerfile runs the server on the official Bun image of the pinned version", () => {
  const dockerfile = readFileSync(new URL("../Dockerfile", import.meta.url), "utf8")
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))
  expect(dockerfile).toContain(`FROM oven/bun:${pkg.devDependencies.bun}`)
  expect(dockerfile).toContain('CMD ["bun", "src/app/main.ts"]')
})
