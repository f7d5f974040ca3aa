/**
 * The one benchmark report: runs every benchmark script under test/bench/ in turn against the real PostgreSQL
 * (BENCH_DATABASE_URL, default the local server; each script creates and drops its own database and starts the
 * service itself), then writes one markdown report (BENCH_REPORT, default `bench-report.md`): a summary table of
 * every figure that has a target (value, target, ceiling and ratio where the script measured one in the same run),
 * followed by each script's own table and notes. `bun run bench` runs this.
 *
 * BENCH_ONLY=traces,otlp runs a subset. A script that fails is reported as failed and the run exits 1 at the end.
 */
import { readdirSync, writeFileSync } from "node:fs"
import { resolve } from "node:path"
import { log, ROOT } from "./Harness.ts"

/** Helpers (the shared workloads too) and the decode-only micro benchmark are not reports of their own. */
const NOT_SCRIPTS = new Set(["Harness.ts", "Copy.ts", "AgentRun.ts", "EnforcementLoad.ts", "all.ts", "otlp-decode.ts"])
const ORDER = ["traces", "otlp", "replay", "enforcement", "search", "gate", "stream", "usage"]

const scripts = readdirSync(resolve(ROOT, "test/bench"))
  .filter((f) => f.endsWith(".ts") && !NOT_SCRIPTS.has(f))
  .map((f) => f.slice(0, -3))
  .sort((a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99) || a.localeCompare(b))
const only = process.env.BENCH_ONLY?.split(",")
  .map((s) => s.trim())
  .filter(Boolean)
const selected = only ? scripts.filter((s) => only.includes(s)) : scripts

/** The first markdown table of `text`: its header cells and rows of cells. */
const firstTable = (text: string) => {
  const lines = text.split("\n")
  const start = lines.findIndex((l, i) => l.startsWith("|") && /^\|\s*-+/.test(lines[i + 1] ?? ""))
  if (start < 0) return undefined
  const cells = (line: string) =>
    line
      .slice(1, line.endsWith("|") ? -1 : undefined)
      .split("|")
      .map((c) => c.trim())
  const rows: Array<Array<string>> = []
  for (let i = start + 2; i < lines.length && lines[i]!.startsWith("|"); i++) rows.push(cells(lines[i]!))
  return { header: cells(lines[start]!), rows }
}

const sections: Array<string> = []
const summary: Array<Array<string>> = []
const failed: Array<string> = []
const startedAt = new Date()

for (const script of selected) {
  log(`== ${script}`)
  const t0 = performance.now()
  const proc = Bun.spawn({
    cmd: [process.execPath, `test/bench/${script}.ts`],
    cwd: ROOT,
    env: process.env,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit"
  })
  const out = await new Response(proc.stdout).text()
  const code = await proc.exited
  const seconds = ((performance.now() - t0) / 1000).toFixed(0)
  process.stdout.write(out)
  if (code !== 0) {
    failed.push(script)
    sections.push(`## ${script} — failed (exit ${code}, ${seconds} s)\n\n${out.trim() || "(no output)"}\n`)
    continue
  }
  sections.push(`## ${script} (\`bun test/bench/${script}.ts\`, ${seconds} s)\n\n${out.trim()}\n`)
  const table = firstTable(out)
  if (!table) continue
  const col = (name: RegExp) => table.header.findIndex((h) => name.test(h))
  const [metric, value, target, ceiling, ratio] = [
    col(/^metric/i),
    col(/^value/i),
    col(/^target/i),
    col(/^ceiling/i),
    col(/ratio|÷/i)
  ]
  for (const row of table.rows) {
    const t = row[target] ?? ""
    if (!/[✓✗]/.test(t)) continue
    summary.push([
      script,
      row[metric] ?? "",
      row[value] ?? "",
      t,
      ceiling >= 0 ? (row[ceiling] ?? "") : "—",
      ratio >= 0 ? (row[ratio] ?? "") : "—"
    ])
  }
}

const report = [
  `# Tapedeck benchmark report`,
  "",
  `Run ${startedAt.toISOString()} with \`bun run bench\` (${selected.join(", ")}); machine: ${navigator.hardwareConcurrency} CPUs, Bun ${Bun.version}.`,
  "Every figure below was measured in this run; ceilings were measured in the same run, side by side.",
  "",
  "| benchmark | figure | value | target | ceiling | ratio |",
  "|---|---|---|---|---|---|",
  ...summary.map((r) => `| ${r.join(" | ")} |`),
  ...(failed.length > 0 ? ["", `Failed: ${failed.join(", ")}.`] : []),
  "",
  ...sections
].join("\n")
const path = resolve(process.env.BENCH_REPORT || "bench-report.md")
writeFileSync(path, report)
log(`report written to ${path}`)
if (failed.length > 0) process.exit(1)
