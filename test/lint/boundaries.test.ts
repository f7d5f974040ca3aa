import { afterAll, describe, expect, test } from "bun:test"
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"

// The dependency rules between floors are lint rules in biome.json (noRestrictedImports per folder). Each rule
// matches import specifiers, so every floor is probed with both spellings a file can use: the package.json alias
// (#src/…, #layers/…) and a relative path. The probes run in a scratch copy of the tree's layout with the
// repository's own biome.json, so a rule that stops matching makes a "bad" row pass and this test fail.
// A new floor or a new rule (an extension that must not reach internal modules) is one more row.
const root = new URL("../..", import.meta.url).pathname
const biome = join(root, "node_modules/.bin/biome")

type Row = readonly [file: string, specifier: string, allowed: boolean]

const rows: ReadonlyArray<Row> = [
  // src/domain: effect and itself
  ["src/domain/Probe.ts", "effect", true],
  ["src/domain/Probe.ts", "effect/Schema", true],
  ["src/domain/Probe.ts", "./Ids.ts", true],
  ["src/domain/Probe.ts", "#src/domain/Ids", true],
  ["src/domain/genai/Probe.ts", "../Ids.ts", true],
  ["src/domain/genai/Probe.ts", "./Attributes.ts", true],
  ["src/domain/Probe.ts", "#src/api/Api", false],
  ["src/domain/Probe.ts", "../api/Api.ts", false],
  ["src/domain/genai/Probe.ts", "../../api/Api.ts", false],
  ["src/domain/Probe.ts", "#src/http/TracesHttp", false],
  ["src/domain/Probe.ts", "../http/TracesHttp.ts", false],
  ["src/domain/Probe.ts", "#layers/jobs/JobQueue", false],
  ["src/domain/genai/Probe.ts", "../../../layers/jobs/JobQueue.ts", false],
  ["src/domain/Probe.ts", "@effect/platform", false],
  ["src/domain/Probe.ts", "@effect/sql", false],
  ["src/domain/Probe.ts", "node:fs", false],
  ["src/domain/Probe.ts", "zod", false],
  // src/api (the contract): src/domain, effect, @effect/platform and itself
  ["src/api/Probe.ts", "@effect/platform", true],
  ["src/api/Probe.ts", "@effect/platform/HttpApiEndpoint", true],
  ["src/api/Probe.ts", "effect", true],
  ["src/api/Probe.ts", "../domain/Ids.ts", true],
  ["src/api/Probe.ts", "#src/domain/Ids", true],
  ["src/api/Probe.ts", "./ApiErrors.ts", true],
  ["src/api/Probe.ts", "#layers/traces/Traces", false],
  ["src/api/Probe.ts", "../../layers/traces/Traces.ts", false],
  ["src/api/Probe.ts", "#src/http/ErrorBodies", false],
  ["src/api/Probe.ts", "../http/ErrorBodies.ts", false],
  ["src/api/Probe.ts", "#src/mcp/McpServer", false],
  ["src/api/Probe.ts", "@effect/sql", false],
  // layers/: never the transports, the contract, the composition root, the browser code or the SDK
  ["layers/jobs/Probe.ts", "#src/domain/Ids", true],
  ["layers/jobs/Probe.ts", "../../src/domain/Ids.ts", true],
  ["layers/jobs/Probe.ts", "../storage/Sql.ts", true],
  ["layers/jobs/Probe.ts", "#layers/storage/Sql", true],
  ["layers/jobs/Probe.ts", "@effect/sql", true],
  ["layers/jobs/Probe.ts", "#src/http/TracesHttp", false],
  ["layers/jobs/Probe.ts", "../../src/http/TracesHttp.ts", false],
  ["layers/jobs/Probe.ts", "#src/api/Api", false],
  ["layers/jobs/Probe.ts", "../../src/api/ApiErrors.ts", false],
  ["layers/jobs/Probe.ts", "#src/mcp/McpServer", false],
  ["layers/ingest/conventions/Probe.ts", "../../../src/mcp/McpServer.ts", false],
  ["layers/jobs/Probe.ts", "#src/app/AppLive", false],
  ["layers/jobs/Probe.ts", "../../src/app/main.ts", false],
  ["layers/jobs/Probe.ts", "#src/ui/app/main", false],
  ["layers/jobs/Probe.ts", "#src/sdk/index", false],
  // src/http: joins the contract to the layers, never the composition root
  ["src/http/Probe.ts", "../api/Api.ts", true],
  ["src/http/Probe.ts", "#layers/traces/Traces", true],
  ["src/http/Probe.ts", "#src/domain/Ids", true],
  ["src/http/Probe.ts", "#src/app/AppLive", false],
  ["src/http/Probe.ts", "../app/AppLive.ts", false],
  ["src/http/Probe.ts", "../sdk/index.ts", false],
  // src/mcp: the same place as src/http for the MCP transport
  ["src/mcp/Probe.ts", "#layers/traces/Traces", true],
  ["src/mcp/Probe.ts", "#src/app/AppLive", false],
  ["src/mcp/Probe.ts", "../app/AppLive.ts", false],
  // src/sdk: nothing from the server
  ["src/sdk/Probe.ts", "./Client.ts", true],
  ["src/sdk/Probe.ts", "node:crypto", true],
  ["src/sdk/Probe.ts", "#src/domain/Ids", false],
  ["src/sdk/Probe.ts", "../domain/Ids.ts", false],
  ["src/sdk/Probe.ts", "#layers/traces/Traces", false],
  ["src/sdk/Probe.ts", "../../layers/traces/Traces.ts", false],
  // src/ui/app (browser code): src/domain and src/api for the typed client, never layers/ or the server
  ["src/ui/app/pages/trace/Probe.tsx", "../../../../domain/Span.ts", true],
  ["src/ui/app/pages/trace/Probe.tsx", "../../../api/Api.ts", true],
  ["src/ui/app/pages/trace/Probe.tsx", "../../api/client.ts", true],
  ["src/ui/app/Probe.tsx", "#src/domain/Span", true],
  ["src/ui/app/Probe.tsx", "#layers/traces/Traces", false],
  ["src/ui/app/pages/trace/Probe.tsx", "../../../../../layers/traces/Traces.ts", false],
  ["src/ui/app/Probe.tsx", "#src/http/TracesHttp", false],
  ["src/ui/app/pages/trace/Probe.tsx", "../../../../http/TracesHttp.ts", false],
  // test/extensions: an extension written as its own package, importing only the public entry points
  ["test/extensions/pii-redactor/Probe.ts", "tapedeck", true],
  ["test/extensions/pii-redactor/Probe.ts", "tapedeck/testing", true],
  ["test/extensions/pii-redactor/Probe.ts", "effect", true],
  ["test/extensions/pii-redactor/Probe.ts", "./Redactor.ts", true],
  ["test/extensions/pii-redactor/Probe.ts", "bun:test", true],
  ["test/extensions/pii-redactor/Probe.ts", "#layers/extensions/SpanProcessors", false],
  ["test/extensions/pii-redactor/Probe.ts", "#src/domain/Span", false],
  ["test/extensions/pii-redactor/Probe.ts", "../../../src/app/AppLive.ts", false],
  ["test/extensions/pii-redactor/Probe.ts", "../../../layers/traces/Traces.ts", false],
  ["test/extensions/pii-redactor/Probe.ts", "../../support/TestServer.ts", false],
  ["test/extensions/pii-redactor/Probe.ts", "tapedeck/src/index.ts", false],
  ["test/extensions/pii-redactor/Probe.ts", "@effect/sql", false],
  // the providers' examples and the kit's own checks: the providers and the kit through the public entry points only
  ["test/extensions/custom-model/Probe.ts", "tapedeck", true],
  ["test/extensions/custom-model/Probe.ts", "./RuleModel.ts", true],
  ["test/extensions/custom-model/Probe.ts", "#layers/llm/LlmClient", false],
  ["test/extensions/custom-model/Probe.ts", "#layers/extensions/Providers", false],
  ["test/extensions/custom-model/Probe.ts", "../../../layers/llm/OpenAiCompatibleLlm.ts", false],
  ["test/extensions/custom-embedder/Probe.ts", "tapedeck", true],
  ["test/extensions/custom-embedder/Probe.ts", "./WordHashEmbedder.ts", true],
  ["test/extensions/custom-embedder/Probe.ts", "#layers/search/Embedder", false],
  ["test/extensions/custom-embedder/Probe.ts", "../../../layers/search/OfflineEmbedder.ts", false],
  ["test/extensions/test-kit/Probe.ts", "tapedeck/testing", true],
  ["test/extensions/test-kit/Probe.ts", "#src/domain/Trace", false],
  ["test/extensions/test-kit/Probe.ts", "../../../src/testing/index.ts", false],
  ["test/extensions/test-kit/Probe.ts", "../../support/FakeOpenAi.ts", false],
  ["test/extensions/test-kit/Probe.ts", "tapedeck/src/testing/index.ts", false],
  ["test/extensions/test-kit/Probe.ts", "fast-check", false]
]

/** The import forms a rule must see: a value import, a type-only import, a re-export and a dynamic import. */
const forms = (specifier: string): ReadonlyArray<string> => [
  `import { probe } from "${specifier}"\nexport const value = probe\n`,
  `import type { Probe } from "${specifier}"\nexport type Value = Probe\n`,
  `export { probe } from "${specifier}"\n`,
  `export const load = () => import("${specifier}")\n`
]

const scratch = mkdtempSync(join(tmpdir(), "tapedeck-lint-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Lints the probe files with the repository's biome.json; the files each rule reported on. */
const lint = (files: ReadonlyArray<readonly [path: string, text: string]>): Map<string, Array<string>> => {
  const config = JSON.parse(readFileSync(join(root, "biome.json"), "utf8"))
  delete config.$schema
  config.vcs = { enabled: false }
  writeFileSync(join(scratch, "biome.json"), JSON.stringify(config))
  for (const [path, text] of files) {
    mkdirSync(dirname(join(scratch, path)), { recursive: true })
    writeFileSync(join(scratch, path), text)
  }
  const run = spawnSync(
    biome,
    ["lint", "--reporter=github", "--max-diagnostics=none", "--only=style/noRestrictedImports", "."],
    {
      cwd: scratch,
      encoding: "utf8"
    }
  )
  const found = new Map<string, Array<string>>()
  for (const m of `${run.stdout}${run.stderr}`.matchAll(/^::error title=([^,]+),file=([^,]+),/gm)) {
    const file = m[2]!.slice(scratch.length + 1)
    found.set(file, [...(found.get(file) ?? []), m[1]!])
  }
  return found
}

describe("dependency rules between floors (biome.json)", () => {
  const probes = rows.flatMap(([file, specifier, allowed], i) =>
    forms(specifier).map((text, j) => ({
      path: file.replace(/Probe(\.tsx?)$/, `Probe${i}_${j}$1`),
      text,
      file,
      specifier,
      allowed
    }))
  )
  const found = lint(probes.map((p) => [p.path, p.text] as const))

  test("every forbidden import is reported, in every import form, through the alias and the relative path", () => {
    const missed = probes.filter((p) => !p.allowed && !found.get(p.path)?.includes("lint/style/noRestrictedImports"))
    expect(missed.map((p) => `${p.file}: ${p.text.trim()}`)).toEqual([])
  })

  test("every allowed import passes", () => {
    const flagged = probes.filter((p) => p.allowed && found.has(p.path))
    expect(flagged.map((p) => `${p.file}: ${p.text.trim()}`)).toEqual([])
  })

  test("the tree as it is keeps every rule", () => {
    const run = spawnSync(
      biome,
      ["lint", "--reporter=github", "--max-diagnostics=none", "--only=style/noRestrictedImports", "."],
      {
        cwd: root,
        encoding: "utf8"
      }
    )
    expect(run.stdout.split("\n").filter((line) => line.startsWith("::error"))).toEqual([])
    expect(run.status).toBe(0)
  })
})
