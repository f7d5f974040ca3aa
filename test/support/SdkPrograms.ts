import type { TestServer } from "./TestServer.ts"

/** What a program under test/sdk-programs prints as its last line. */
export interface ProgramResult {
  readonly traceId: string
  readonly flushed: boolean
  readonly error?: string
}

/**
 * Runs one of test/sdk-programs in a child process (so the SDK's global tracer is its own), with `env` over this
 * process's environment; its exit code, stderr and the JSON of its last stdout line.
 */
export const runSdkProgram = async (program: string, env: Record<string, string>) => {
  const child = Bun.spawn([process.execPath, program], {
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return { code, err, result: JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as ProgramResult }
}

/** The detail of the trace recorded from an OpenTelemetry trace id (among the account's latest 100), if any. */
export const traceByOtelId = async (server: TestServer, otelTraceId: string): Promise<any> => {
  const list = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
  const found = list.items.find((t: any) => t.metadata?.otel?.trace_id === otelTraceId)
  return found === undefined ? undefined : (await server.get(`/api/v1/traces/${found.id}`)).json()
}
