import { readFileSync } from "node:fs"
import { join } from "node:path"

/**
 * The agent frameworks Tapedeck is tested with: each one's smallest agent (one tool, two model turns) in
 * test/framework-programs/, run under `node`, and the package whose version names its recorded fixture.
 */
export interface Framework {
  readonly program: string
  readonly packageName: string
  readonly version: () => string
}

const ROOT = join(import.meta.dir, "..", "..")

const framework = (file: string, packageName: string): Framework => ({
  program: join(ROOT, "test", "framework-programs", file),
  packageName,
  version: () => JSON.parse(readFileSync(join(ROOT, "node_modules", packageName, "package.json"), "utf8")).version
})

export const FRAMEWORKS = {
  "ai-sdk": framework("ai-sdk.mjs", "ai"),
  langgraph: framework("langgraph.mjs", "@langchain/langgraph"),
  "openai-agents": framework("openai-agents.mjs", "@openai/agents"),
  mastra: framework("mastra.mjs", "@mastra/core"),
  llamaindex: framework("llamaindex.mjs", "llamaindex")
} satisfies Record<string, Framework>

export type FrameworkName = keyof typeof FRAMEWORKS

/**
 * The environment a framework program runs in: this process's, without `NODE_ENV` (Bun's test runner sets it to
 * `test`, which turns the OpenAI Agents SDK's tracing off, as it would not be in an agent's own deployment).
 */
export const programEnv = (vars: Record<string, string>): Record<string, string | undefined> => {
  const { NODE_ENV: _, ...env } = process.env
  return { ...env, ...vars }
}

/** test/fixtures/otlp/frameworks/<name>-<version>.json */
export const fixturePath = (name: FrameworkName) =>
  join(ROOT, "test", "fixtures", "otlp", "frameworks", `${name}-${FRAMEWORKS[name].version()}.json`)
