/**
 * `tapedeck gate`: the CI gate from a pipeline. Calls POST /api/v1/evaluations/{id}/gate over HTTP, prints a
 * short table and exits 0 when the gate passed, 1 when it failed, 2 on a usage error or when the service could
 * not give a verdict (unreachable, 4xx/5xx).
 */

export const GATE_USAGE = `usage:
  npx bun run tapedeck gate --evaluation ID --traces ID1,ID2,… [--threshold 0.7] [--baseline RUN1,RUN2,…]
                            [--no-fail-on-regression] [--url URL] [--key KEY] [--timeout SECONDS]

  --url defaults to TAPEDECK_URL (else http://localhost:8080), --key to TAPEDECK_API_KEY.
  Exit status: 0 passed, 1 failed, 2 usage or HTTP error.`

export interface GateArgs {
  readonly url: string
  readonly key: string
  readonly evaluationId: string
  readonly traceIds: ReadonlyArray<string>
  readonly threshold: number | undefined
  readonly baselineRunIds: ReadonlyArray<string> | undefined
  readonly failOnRegression: boolean
  readonly timeoutSeconds: number
}

const VALUE_FLAGS = new Set(["--evaluation", "--traces", "--threshold", "--baseline", "--url", "--key", "--timeout"])
const BOOLEAN_FLAGS = new Set(["--no-fail-on-regression"])

const list = (text: string) =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")

/** The arguments, or why they are not usable. */
export const parseGateArgs = (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>
): GateArgs | string => {
  const values = new Map<string, string>()
  const flags = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (BOOLEAN_FLAGS.has(arg)) {
      flags.add(arg)
    } else if (VALUE_FLAGS.has(arg)) {
      const value = argv[i + 1]
      if (value === undefined || value.startsWith("--")) return `${arg} needs a value`
      values.set(arg, value)
      i++
    } else {
      return `unknown argument '${arg}'`
    }
  }
  const evaluationId = values.get("--evaluation")
  if (evaluationId === undefined) return "--evaluation ID is required"
  const traceIds = list(values.get("--traces") ?? "")
  if (traceIds.length === 0) return "--traces ID1,ID2,… is required"
  let threshold: number | undefined
  const rawThreshold = values.get("--threshold")
  if (rawThreshold !== undefined) {
    threshold = Number(rawThreshold)
    if (rawThreshold.trim() === "" || !Number.isFinite(threshold) || threshold < 0 || threshold > 1) {
      return `--threshold must be a number from 0 to 1, got '${rawThreshold}'`
    }
  }
  const timeoutSeconds = Number(values.get("--timeout") ?? "600")
  if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) return "--timeout must be a positive number of seconds"
  const url = (values.get("--url") ?? env.TAPEDECK_URL ?? "http://localhost:8080").replace(/\/+$/, "")
  if (!/^https?:\/\//.test(url)) return `--url must be an http(s) URL, got '${url}'`
  const key = values.get("--key") ?? env.TAPEDECK_API_KEY ?? ""
  if (key === "") return "an API key is required: --key KEY or TAPEDECK_API_KEY"
  const baseline = values.get("--baseline")
  return {
    url,
    key,
    evaluationId,
    traceIds,
    threshold,
    baselineRunIds: baseline === undefined ? undefined : list(baseline),
    failOnRegression: !flags.has("--no-fail-on-regression"),
    timeoutSeconds
  }
}

const fmt = (n: unknown) => (typeof n === "number" ? n.toFixed(4) : "-")
const pad = (text: string, width: number) => text.padEnd(width)

/** The longest error printed per failed run. */
const FAILED_RUN_ERROR_CHARS = 500

const oneLine = (text: string) => text.replace(/\s+/g, " ")

/**
 * The failed runs: from `failed_runs`, or from the runs when the server predates that field. Each says why; a
 * failed run fails the gate and is not counted in the score or the regression.
 */
const failedRunLines = (result: any, runs: ReadonlyArray<any>): Array<string> => {
  const failed: ReadonlyArray<any> = Array.isArray(result?.failed_runs)
    ? result.failed_runs
    : runs.filter((r) => r.status !== "completed").map((r) => ({ trace_id: r.traceId, run_id: r.id, error: r.error }))
  if (failed.length === 0) return []
  const judged = typeof result?.judged_traces === "number" ? result.judged_traces : runs.length - failed.length
  const clipped = (text: string) =>
    text.length > FAILED_RUN_ERROR_CHARS ? `${text.slice(0, FAILED_RUN_ERROR_CHARS)}…` : text
  return [
    "",
    `FAILED RUNS (${failed.length}): not scored, each fails the gate; score and regression cover the ${judged} judged trace${judged === 1 ? "" : "s"}`,
    ...failed.map((f) => `  ${f.trace_id} (run ${f.run_id}): ${clipped(oneLine(String(f.error ?? "no reason given")))}`)
  ]
}

/** The verdict as printed: one row per trace, the failed runs with why, the totals and PASSED or FAILED with the reasons. */
export const formatGate = (result: any): string => {
  const runs: ReadonlyArray<any> = Array.isArray(result?.runs) ? result.runs : []
  const lines = [
    `${pad("TRACE", 37)} ${pad("STATUS", 10)} ${pad("SCORE", 7)} ${pad("REUSED", 6)} NOTE`,
    ...runs.map(
      (r) =>
        `${pad(String(r.traceId), 37)} ${pad(String(r.status), 10)} ${pad(fmt(r.score), 7)} ${pad(r.reused ? "yes" : "no", 6)} ${oneLine(
          String(r.error ?? "")
        ).slice(0, 120)}`
    ),
    ...failedRunLines(result, runs),
    "",
    [
      `score ${fmt(result.score)}`,
      `threshold ${fmt(result.threshold)}`,
      ...(result.baseline_score === undefined
        ? []
        : [`baseline ${fmt(result.baseline_score)} (tolerance ${result.regression_tolerance})`]),
      `regression ${result.regression ? "yes" : "no"}`,
      `judge ${result.judge_model ?? "?"}`
    ].join(" · "),
    result.passed === true
      ? "PASSED"
      : `FAILED${Array.isArray(result.reasons) && result.reasons.length > 0 ? `: ${result.reasons.join("; ")}` : ""}`
  ]
  return lines.join("\n")
}

export interface GateIo {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
}

/** Runs the gate command; resolves to the exit status. */
export const gateMain = async (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
  io: GateIo = { out: (t) => console.log(t), err: (t) => console.error(t) }
): Promise<number> => {
  if (argv.includes("--help") || argv.includes("-h")) {
    io.out(GATE_USAGE)
    return 0
  }
  const args = parseGateArgs(argv, env)
  if (typeof args === "string") {
    io.err(`tapedeck gate: ${args}\n\n${GATE_USAGE}`)
    return 2
  }
  const body = {
    trace_ids: args.traceIds,
    ...(args.threshold === undefined ? {} : { threshold: args.threshold }),
    fail_on_regression: args.failOnRegression,
    ...(args.baselineRunIds === undefined ? {} : { baseline_run_ids: args.baselineRunIds })
  }
  const endpoint = `${args.url}/api/v1/evaluations/${encodeURIComponent(args.evaluationId)}/gate`
  let response: Response
  try {
    response = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-key": args.key },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(args.timeoutSeconds * 1000)
    })
  } catch (e) {
    io.err(`tapedeck gate: could not reach ${args.url}: ${e instanceof Error ? e.message : String(e)}`)
    return 2
  }
  const text = await response.text().catch(() => "")
  let result: any
  try {
    result = JSON.parse(text)
  } catch {
    result = undefined
  }
  if (response.status !== 200 || typeof result?.passed !== "boolean") {
    const detail = typeof result?.error === "string" ? result.error : text.slice(0, 300)
    io.err(`tapedeck gate: HTTP ${response.status}${detail === "" ? "" : `: ${detail}`}`)
    return 2
  }
  io.out(formatGate(result))
  return result.passed ? 0 : 1
}
