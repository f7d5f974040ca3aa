/**
 * Fork-replay benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/replay.ts`).
 *
 * Measures the server-mode replay path's own overhead, with a model provider that answers instantly.
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server, starts a fake OpenAI-compatible provider in this
 *    process (test/support/FakeOpenAi.ts: answers at once) and the service (`bun src/app/main.ts`) as a separate
 *    process pointed at it (TAPEDECK_LLM_BASE_URL), with an allowance and inline limit that keep every replay
 *    inline (`status: "completed"` in the response).
 * 2. Records BENCH_CONCURRENCY source traces of BENCH_SPANS spans each: an `action` root ("agent") and, under
 *    it, turns of reasoning → llm_call → tool_calls → action (BENCH_LLM_CALLS llm_call spans of model
 *    gpt-4o-mini with chat-message inputs, BENCH_TOOL_CALLS tool_call spans, the rest reasoning/action),
 *    payloads of 0.5–1 KB per span. Forks each at its first llm_call at or after BENCH_FORK_AT of the way in
 *    (the spans before are copied, the rest replayed), with a modified input and one mocked tool.
 * 3. Sequential: for BENCH_SECONDS (after BENCH_WARMUP_SECONDS of the same), rounds of
 *    POST /api/v1/forks/{id}/replay (a new generation each time), then the ceiling in the same round: the bare
 *    work the replay cannot avoid through the API, GET /api/v1/traces/{source} (the recorded trace) and
 *    POST /api/v1/traces of the replay's result trace (same spans, a fresh trace id). Interleaving keeps both
 *    under the same conditions (database size, background jobs).
 * 4. Concurrent: BENCH_CONCURRENCY workers, each replaying its own fork, for BENCH_CONCURRENT_SECONDS; then as
 *    long with each worker doing GET + POST of its source and result instead.
 * 5. Checks every replay: HTTP 200, status "completed", mode "server", faithful_reexec = the llm_call spans
 *    after the fork point, byte_replayed = the spans before it, and exactly that many requests reached the
 *    fake; at the end, every generation's result trace is stored with all its spans.
 * 6. For context: the floor of one replay's model calls (the same requests sent from this process to the fake)
 *    and how long they took inside the server (from the result traces' llm_call timestamps).
 * 7. Prints a markdown table; drops the database, stops the server and the fake (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_CONCURRENT_SECONDS, BENCH_CONCURRENCY,
 * BENCH_SPANS, BENCH_LLM_CALLS, BENCH_TOOL_CALLS, BENCH_FORK_AT (a fraction, default 0.25), BENCH_ANALYZE
 * (default on: ANALYZE after the warm-up; "off" keeps a fresh database's missing statistics), BENCH_CPU_PROF
 * (a directory: the server runs under `bun --cpu-prof --cpu-prof-md` and writes its profile there on exit).
 */
import { availableParallelism } from "node:os"
import { type FakeOpenAi, startFakeOpenAi } from "../support/FakeOpenAi.ts"
import {
  commandLine,
  connect,
  type CoresBusy,
  cpuMeter,
  filler,
  fmtCores,
  fmtInt,
  fmtMs,
  fmtRatio,
  freshDatabase,
  KEY,
  latencyStats,
  log,
  mark,
  numberEnv,
  onCleanup,
  runBench,
  type Server,
  startServer,
  SYSTEM_PROMPT,
  tableLines
} from "./Harness.ts"

// ---------------------------------------------------------------------------------------------- settings

const SECONDS = numberEnv("BENCH_SECONDS", 20)
const WARMUP_SECONDS = numberEnv("BENCH_WARMUP_SECONDS", 4)
const CONCURRENT_SECONDS = numberEnv("BENCH_CONCURRENT_SECONDS", 12)
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 4))
const SPANS = Math.floor(numberEnv("BENCH_SPANS", 200))
const LLM_CALLS = Math.floor(numberEnv("BENCH_LLM_CALLS", 40))
const TOOL_CALLS = Math.floor(numberEnv("BENCH_TOOL_CALLS", 80))
const FORK_AT = numberEnv("BENCH_FORK_AT", 0.25)
const ANALYZE = (process.env.BENCH_ANALYZE ?? "on").toLowerCase() !== "off"

if (LLM_CALLS + TOOL_CALLS > SPANS - 1) {
  throw new Error(
    `BENCH_LLM_CALLS + BENCH_TOOL_CALLS (${LLM_CALLS + TOOL_CALLS}) must leave room for the root in BENCH_SPANS (${SPANS})`
  )
}
if (FORK_AT >= 1) throw new Error(`BENCH_FORK_AT must be below 1, got ${FORK_AT}`)

const TARGET_REPLAY_P50_MS = 100
const MODEL = "gpt-4o-mini"

const AUTH = { "x-service-key": KEY }
const JSON_AUTH = { "content-type": "application/json", ...AUTH }

const KNOBS = [
  "BENCH_DATABASE_URL",
  "BENCH_SECONDS",
  "BENCH_WARMUP_SECONDS",
  "BENCH_CONCURRENT_SECONDS",
  "BENCH_CONCURRENCY",
  "BENCH_SPANS",
  "BENCH_LLM_CALLS",
  "BENCH_TOOL_CALLS",
  "BENCH_FORK_AT",
  "BENCH_ANALYZE",
  "BENCH_CPU_PROF"
]
const COMMAND = commandLine(KNOBS, "test/bench/replay.ts")

const fmtRate = (n: number) => (n < 100 ? n.toFixed(1) : fmtInt(n))

/**
 * PostgreSQL CPU by pid: processes alive at the end, less what they had at the start (a backend that exits between
 * two snapshots would otherwise take its whole CPU time out of the difference).
 */
const CPU = cpuMeter("perPid")

// ---------------------------------------------------------------------------------------------- payloads

const pool = (count: number, chars: number) => Array.from({ length: count }, () => filler(chars))
const USER_PROMPTS = pool(64, 330)
const COMPLETIONS = pool(64, 240)
const THOUGHTS = pool(64, 260)
const QUERIES = pool(64, 160)
const RESULTS = pool(64, 300)
const SYSTEM = SYSTEM_PROMPT
const TOOLS = ["web_search", "fetch_page", "run_python", "read_file"] as const
const MOCKED_TOOL = "web_search"
const MODIFIED_INPUT = "Use the 2026 figures instead of the 2025 ones, and keep the answer under 200 words."

type SpanType = "action" | "reasoning" | "llm_call" | "tool_call"

/**
 * The span types of the root's children, in order: LLM_CALLS turns of reasoning → llm_call → tool_calls →
 * action, the tool calls and the reasoning/action spans spread evenly over the turns.
 */
const childTypes = (): Array<SpanType> => {
  const others = SPANS - 1 - LLM_CALLS - TOOL_CALLS
  const share = (total: number, t: number) =>
    Math.floor(((t + 1) * total) / LLM_CALLS) - Math.floor((t * total) / LLM_CALLS)
  const types: Array<SpanType> = []
  for (let t = 0; t < LLM_CALLS; t++) {
    const turnOthers = share(others, t)
    if (turnOthers > 0) types.push("reasoning")
    types.push("llm_call")
    for (let k = 0; k < share(TOOL_CALLS, t); k++) types.push("tool_call")
    for (let k = 1; k < turnOthers; k++) types.push(k % 2 === 1 ? "action" : "reasoning")
  }
  if (LLM_CALLS === 0) {
    for (let k = 0; k < TOOL_CALLS; k++) types.push("tool_call")
    for (let k = 0; k < others; k++) types.push(k % 2 === 0 ? "reasoning" : "action")
  }
  return types
}
const TYPES: ReadonlyArray<SpanType> = ["action", ...childTypes()]

/** The fork point: the first llm_call at or after FORK_AT of the way in (else the span there). */
const FORK_INDEX = (() => {
  const from = Math.max(1, Math.round(SPANS * FORK_AT))
  const llm = TYPES.findIndex((t, i) => i >= from && t === "llm_call")
  return llm >= 0 ? llm : Math.min(from, SPANS - 1)
})()
/** Every child hangs off the root, so the fork point has no subtree: everything before it is copied. */
const EXPECTED_BYTE_REPLAYED = FORK_INDEX
const EXPECTED_REEXEC = TYPES.filter((t, i) => i >= FORK_INDEX && t === "llm_call").length
const EXPECTED_RESULT_SPANS = SPANS + 1 // plus the fork_point span

interface BenchSpan {
  readonly id: string
  readonly parent_id: string | null
  readonly span_type: SpanType
  readonly name: string
  readonly model?: string
  readonly input: unknown
  readonly output: unknown
  readonly input_tokens?: number
  readonly output_tokens?: number
  readonly cost?: number
  readonly agent_id?: string
  readonly started_at: string
  readonly ended_at: string
}

/** A recorded agent run: the root, then turns under it, ~0.5–1 KB of JSON per span. */
const makeSpans = (startMs: number): Array<BenchSpan> => {
  const rootId = crypto.randomUUID()
  const pick = <A>(list: ReadonlyArray<A>, i: number) => list[(i * 7 + 3) % list.length]!
  const history: Array<{ role: string; content: string }> = []
  let toolIndex = 0
  return TYPES.map((type, i): BenchSpan => {
    const started = startMs + i * 250
    const common = {
      id: i === 0 ? rootId : crypto.randomUUID(),
      parent_id: i === 0 ? null : rootId,
      started_at: new Date(started).toISOString(),
      ended_at: new Date(i === 0 ? startMs + SPANS * 250 : started + 200).toISOString()
    }
    switch (type) {
      case "action":
        return i === 0
          ? {
              ...common,
              span_type: "action",
              name: "agent",
              agent_id: "research-agent",
              input: { task: pick(USER_PROMPTS, i) },
              output: { answer: pick(COMPLETIONS, i), sources: 12 }
            }
          : {
              ...common,
              span_type: "action",
              name: "act: update plan",
              input: { action: "update_plan", arguments: { note: pick(QUERIES, i) } },
              output: { status: "ok", plan: pick(THOUGHTS, i) }
            }
      case "reasoning":
        return {
          ...common,
          span_type: "reasoning",
          name: "think",
          input: { observation: pick(QUERIES, i) },
          output: { thought: pick(THOUGHTS, i), next: "call the model" }
        }
      case "llm_call": {
        const user = { role: "user", content: pick(USER_PROMPTS, i) }
        // The system prompt, the last exchange, and this turn's user message.
        const messages = [{ role: "system", content: SYSTEM }, ...history.slice(-1), user]
        const completion = pick(COMPLETIONS, i)
        history.push({ role: "assistant", content: completion.slice(0, 120) })
        return {
          ...common,
          span_type: "llm_call",
          name: "llm.chat",
          model: MODEL,
          input: messages,
          output: { role: "assistant", content: completion },
          input_tokens: 180 + (i % 50),
          output_tokens: 60 + (i % 30),
          cost: 0.0000675 + (i % 7) * 0.000001
        }
      }
      case "tool_call": {
        const tool = TOOLS[toolIndex++ % TOOLS.length]!
        return {
          ...common,
          span_type: "tool_call",
          name: tool,
          input: { tool, arguments: { query: pick(QUERIES, i), top_k: 5 } },
          output: { results: [{ title: `result ${i}`, snippet: pick(RESULTS, i) }] }
        }
      }
    }
  })
}

let clock = Date.UTC(2026, 0, 1)
/** A fresh recorded trace (new ids, advancing start time) as its POST body. */
const makeSourceTrace = () => {
  const startMs = (clock += 600_000)
  const spans = makeSpans(startMs)
  return {
    id: crypto.randomUUID(),
    started_at: new Date(startMs).toISOString(),
    ended_at: new Date(startMs + SPANS * 250).toISOString(),
    name: "research agent run",
    input: spans[0]!.input,
    output: spans[0]!.output,
    status: "completed",
    metadata: { agent: "research-agent", environment: "production" },
    spans
  }
}

// ---------------------------------------------------------------------------------------------- API calls

class BenchFailure extends Error {}

const fail = (server: Server, message: string): never => {
  throw new BenchFailure(`${message}\nserver output (tail):\n${server.output().slice(-4000)}`)
}

/** One source trace and its fork: what a worker replays, and the bodies of its ceiling requests. */
interface Subject {
  readonly traceId: string
  readonly forkId: string
  /** The POST body of the replay's result trace with `__TRACE_ID__` where the (fresh) trace id goes. */
  resultTemplate?: string
}

interface ReplayResponse {
  readonly fork_id: string
  readonly result_trace_id: string
  readonly status: string
  readonly mode: string
  readonly execution_id: string
  readonly byte_replayed?: number
  readonly faithful_reexec?: number
  readonly fidelity_caveats?: ReadonlyArray<string>
  readonly error?: string
}

/** POST /api/v1/forks/{id}/replay: its latency, checked to be a completed inline server replay. */
const replay = async (server: Server, subject: Subject) => {
  const t0 = performance.now()
  const res = await fetch(`${server.url}/api/v1/forks/${subject.forkId}/replay`, { method: "POST", headers: AUTH })
  const text = await res.text()
  const ms = performance.now() - t0
  if (res.status !== 200) fail(server, `replay of fork ${subject.forkId}: HTTP ${res.status} ${text.slice(0, 500)}`)
  const body = JSON.parse(text) as ReplayResponse
  if (
    body.status !== "completed" ||
    body.mode !== "server" ||
    body.faithful_reexec !== EXPECTED_REEXEC ||
    body.byte_replayed !== EXPECTED_BYTE_REPLAYED
  ) {
    fail(
      server,
      `replay of fork ${subject.forkId} answered ${text.slice(0, 800)}; expected status "completed", mode "server", ` +
        `faithful_reexec ${EXPECTED_REEXEC}, byte_replayed ${EXPECTED_BYTE_REPLAYED}`
    )
  }
  return { ms, body }
}

/** GET /api/v1/traces/{source}: its latency, checked to carry every span. */
const readSource = async (server: Server, subject: Subject) => {
  const t0 = performance.now()
  const res = await fetch(`${server.url}/api/v1/traces/${subject.traceId}`, { headers: AUTH })
  const buffer = await res.arrayBuffer()
  const ms = performance.now() - t0
  if (res.status !== 200)
    fail(server, `GET trace ${subject.traceId}: HTTP ${res.status} ${new TextDecoder().decode(buffer).slice(0, 500)}`)
  return { ms, bytes: buffer.byteLength }
}

/** POST /api/v1/traces of the replay's result trace under a fresh id: its latency. */
const writeResult = async (server: Server, subject: Subject) => {
  const body = subject.resultTemplate!.replace("__TRACE_ID__", crypto.randomUUID())
  const t0 = performance.now()
  const res = await fetch(`${server.url}/api/v1/traces`, { method: "POST", headers: JSON_AUTH, body })
  const text = await res.text()
  const ms = performance.now() - t0
  if (res.status !== 200) fail(server, `POST of a result trace: HTTP ${res.status} ${text.slice(0, 500)}`)
  return { ms, bytes: body.length }
}

/** The POST body of a stored trace (read through the API) with a placeholder for a fresh trace id. */
const resultTemplateOf = async (server: Server, traceId: string) => {
  const res = await fetch(`${server.url}/api/v1/traces/${traceId}`, { headers: AUTH })
  const text = await res.text()
  if (res.status !== 200) fail(server, `GET result trace ${traceId}: HTTP ${res.status} ${text.slice(0, 500)}`)
  const t = JSON.parse(text) as {
    startedAt: string
    endedAt?: string | null
    name?: string | null
    input?: unknown
    output?: unknown
    status: string
    metadata?: Record<string, unknown> | null
    sessionId?: string | null
    spans: Array<{ span_type: string; metadata?: { replay?: { reexecuted?: boolean } } }>
  }
  if (t.spans.length !== EXPECTED_RESULT_SPANS)
    fail(server, `result trace ${traceId} has ${t.spans.length} spans, expected ${EXPECTED_RESULT_SPANS}`)
  const reexecuted = t.spans.filter((s) => s.span_type === "llm_call" && s.metadata?.replay?.reexecuted === true).length
  if (reexecuted !== EXPECTED_REEXEC)
    fail(server, `result trace ${traceId} has ${reexecuted} re-executed llm_call spans, expected ${EXPECTED_REEXEC}`)
  if (t.spans.filter((s) => s.span_type === "fork_point").length !== 1)
    fail(server, `result trace ${traceId} has no single fork_point span`)
  // The same body the replay stored (its ServerReplay request): no totals, the result's metadata and spans.
  const body = {
    id: "__TRACE_ID__",
    started_at: t.startedAt,
    ...(t.name ? { name: t.name } : {}),
    ...(t.input !== undefined && t.input !== null ? { input: t.input } : {}),
    ...(t.output !== undefined && t.output !== null ? { output: t.output } : {}),
    status: t.status,
    ...(t.metadata ? { metadata: t.metadata } : {}),
    ...(t.sessionId ? { session_id: t.sessionId } : {}),
    spans: t.spans
  }
  return JSON.stringify(body)
}

// ---------------------------------------------------------------------------------------------- phases

interface SequentialRun {
  readonly replays: Array<number>
  readonly reads: Array<number>
  readonly writes: Array<number>
  /** GET + POST of the same round. */
  readonly pairs: Array<number>
  readonly modelCalls: Array<number>
  readonly resultTraceIds: Array<string>
  readonly seconds: number
  readonly readBytes: number
  readonly writeBytes: number
}

/** Rounds of replay, GET source, POST result, one request at a time, for `seconds`. */
const sequential = async (
  server: Server,
  fake: FakeOpenAi,
  subject: Subject,
  seconds: number
): Promise<SequentialRun> => {
  const run: SequentialRun = {
    replays: [],
    reads: [],
    writes: [],
    pairs: [],
    modelCalls: [],
    resultTraceIds: [],
    seconds: 0,
    readBytes: 0,
    writeBytes: 0
  }
  const start = performance.now()
  const end = start + seconds * 1000
  let readBytes = 0
  let writeBytes = 0
  while (performance.now() < end) {
    const before = fake.requests.length
    const r = await replay(server, subject)
    const calls = fake.requests.length - before
    if (calls !== EXPECTED_REEXEC) fail(server, `a replay made ${calls} model calls, expected ${EXPECTED_REEXEC}`)
    run.replays.push(r.ms)
    run.modelCalls.push(calls)
    run.resultTraceIds.push(r.body.result_trace_id)
    const read = await readSource(server, subject)
    const write = await writeResult(server, subject)
    run.reads.push(read.ms)
    run.writes.push(write.ms)
    run.pairs.push(read.ms + write.ms)
    readBytes = read.bytes
    writeBytes = write.bytes
  }
  return { ...run, seconds: (performance.now() - start) / 1000, readBytes, writeBytes }
}

/** One worker per subject doing `work` back to back for `seconds`; latencies and completions. */
const concurrent = async (subjects: ReadonlyArray<Subject>, seconds: number, work: (s: Subject) => Promise<number>) => {
  const latencies: Array<number> = []
  const start = performance.now()
  const end = start + seconds * 1000
  await Promise.all(
    subjects.map(async (subject) => {
      while (performance.now() < end) latencies.push(await work(subject))
    })
  )
  return { latencies, seconds: (performance.now() - start) / 1000 }
}

/** The model calls of one replay straight from this process to the fake: the floor of the provider round trips. */
const modelFloor = async (fake: FakeOpenAi, sample: ReadonlyArray<unknown>, rounds: number) => {
  const totals: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now()
    for (const body of sample) {
      const res = await fetch(`${fake.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      await res.arrayBuffer()
    }
    totals.push(performance.now() - t0)
  }
  return latencyStats(totals)
}

/**
 * How long the model calls took inside replays, from their result traces: the first re-executed llm_call's
 * start to the last one's end (millisecond timestamps), for up to `limit` results spread over `ids`.
 */
const modelLoops = async (server: Server, ids: ReadonlyArray<string>, limit: number) => {
  const step = Math.max(1, Math.floor(ids.length / limit))
  const loops: Array<number> = []
  for (let i = 0; i < ids.length && loops.length < limit; i += step) {
    const res = await fetch(`${server.url}/api/v1/traces/${ids[i]}`, { headers: AUTH })
    const text = await res.text()
    if (res.status !== 200) fail(server, `GET result trace ${ids[i]}: HTTP ${res.status} ${text.slice(0, 500)}`)
    const spans = (
      JSON.parse(text) as {
        spans: Array<{
          span_type: string
          started_at: string
          ended_at?: string
          metadata?: { replay?: { reexecuted?: boolean; executed_at?: string } }
        }>
      }
    ).spans.filter((s) => s.span_type === "llm_call" && s.metadata?.replay?.reexecuted === true)
    if (spans.length === 0) continue
    // A re-executed call sits on the recording's timeline; when it really ran is its replay.executed_at, and it
    // lasted its span's duration.
    const ran = spans.map((s) => {
      const start = Date.parse(s.metadata?.replay?.executed_at ?? s.started_at)
      return { start, end: start + (Date.parse(s.ended_at ?? s.started_at) - Date.parse(s.started_at)) }
    })
    const first = Math.min(...ran.map((r) => r.start))
    const last = Math.max(...ran.map((r) => r.end))
    loops.push(last - first)
  }
  return latencyStats(loops)
}

// ---------------------------------------------------------------------------------------------- main

const main = async () => {
  const { database, databaseUrl, pgVersion } = await freshDatabase()

  const fake = startFakeOpenAi()
  onCleanup(async () => {
    await fake.stop()
    log("fake model provider stopped")
  })

  log(`database ${database}; fake provider at ${fake.baseUrl}; starting the server`)
  const server = await startServer(databaseUrl, {
    extraEnv: {
      TAPEDECK_LLM_BASE_URL: fake.baseUrl,
      TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "1000000",
      TAPEDECK_REPLAY_INLINE_MAX_MODEL_CALLS: "1000"
    }
  })
  const db = await connect(databaseUrl)

  // Record the source traces and fork each.
  const subjects: Array<Subject> = []
  let spanBytes = 0
  let sourceBodyBytes = 0
  for (let i = 0; i < CONCURRENCY; i++) {
    const source = makeSourceTrace()
    const body = JSON.stringify(source)
    sourceBodyBytes = body.length
    spanBytes = source.spans.reduce((n, s) => n + JSON.stringify(s).length, 0) / source.spans.length
    const created = await fetch(`${server.url}/api/v1/traces`, { method: "POST", headers: JSON_AUTH, body })
    const createdText = await created.text()
    if (created.status !== 200)
      fail(server, `recording source trace: HTTP ${created.status} ${createdText.slice(0, 500)}`)
    const forkPoint = source.spans[FORK_INDEX]!
    const forkRes = await fetch(`${server.url}/api/v1/forks`, {
      method: "POST",
      headers: JSON_AUTH,
      body: JSON.stringify({
        trace_id: source.id,
        fork_point_span_id: forkPoint.id,
        modified_input: MODIFIED_INPUT,
        name: `what-if ${i + 1}`,
        mock_outputs: { [MOCKED_TOOL]: { results: [{ title: "mocked", snippet: RESULTS[0] }] } }
      })
    })
    const forkText = await forkRes.text()
    if (forkRes.status !== 200) fail(server, `creating a fork: HTTP ${forkRes.status} ${forkText.slice(0, 500)}`)
    subjects.push({ traceId: source.id, forkId: (JSON.parse(forkText) as { id: string }).id })
  }
  const forkPointType = TYPES[FORK_INDEX]
  log(
    `${CONCURRENCY} source traces of ${SPANS} spans (${LLM_CALLS} llm_call, ${TOOL_CALLS} tool_call, ` +
      `${SPANS - 1 - LLM_CALLS - TOOL_CALLS} reasoning/action under an action root; ~${Math.round(spanBytes)} B per span), ` +
      `forked at span ${FORK_INDEX} (${forkPointType}): ${EXPECTED_BYTE_REPLAYED} copied, ${SPANS - EXPECTED_BYTE_REPLAYED} replayed, ` +
      `${EXPECTED_REEXEC} model calls per replay`
  )

  // One replay per fork first: checks them, and gives each subject its result trace for the ceiling's POSTs.
  for (const subject of subjects) {
    const first = await replay(server, subject)
    subject.resultTemplate = await resultTemplateOf(server, first.body.result_trace_id)
  }
  const firstCaveats = (await replay(server, subjects[0]!)).body.fidelity_caveats ?? []
  let replaysDone = subjects.length + 1
  let writesDone = 0
  const seq = subjects[0]!

  log(`warm-up: ${WARMUP_SECONDS} s of sequential rounds (replay, GET source, POST result)`)
  const warm = await sequential(server, fake, seq, WARMUP_SECONDS)
  replaysDone += warm.replays.length
  writesDone += warm.writes.length
  // Warm up the concurrent path too (connection pool growth, more than one replay in flight).
  const warmConcurrent = await concurrent(
    subjects,
    Math.min(2, WARMUP_SECONDS),
    async (s) => (await replay(server, s)).ms
  )
  replaysDone += warmConcurrent.latencies.length
  if (ANALYZE) await db.query("ANALYZE")
  await db.query("CHECKPOINT")

  log(
    `sequential: ${SECONDS} s of rounds (replay fork, GET ${SPANS}-span source, POST ${EXPECTED_RESULT_SPANS}-span result)`
  )
  const seqCpu0 = CPU.snapshot(server.pid)
  const run = await sequential(server, fake, seq, SECONDS)
  const seqCpu = CPU.busy(seqCpu0, CPU.snapshot(server.pid))
  replaysDone += run.replays.length
  writesDone += run.writes.length

  log(`concurrent: ${CONCURRENT_SECONDS} s of replays, ${CONCURRENCY} workers on ${CONCURRENCY} forks`)
  const callsBefore = fake.requests.length
  const concCpu0 = CPU.snapshot(server.pid)
  const conc = await concurrent(subjects, CONCURRENT_SECONDS, async (s) => (await replay(server, s)).ms)
  const concCpu = CPU.busy(concCpu0, CPU.snapshot(server.pid))
  const concCalls = fake.requests.length - callsBefore
  if (concCalls !== conc.latencies.length * EXPECTED_REEXEC) {
    fail(
      server,
      `${conc.latencies.length} concurrent replays made ${concCalls} model calls, expected ${conc.latencies.length * EXPECTED_REEXEC}`
    )
  }
  replaysDone += conc.latencies.length

  log(`concurrent ceiling: ${CONCURRENT_SECONDS} s of GET source + POST result, ${CONCURRENCY} workers`)
  const ceilCpu0 = CPU.snapshot(server.pid)
  const concCeiling = await concurrent(subjects, CONCURRENT_SECONDS, async (s) => {
    const read = await readSource(server, s)
    const write = await writeResult(server, s)
    return read.ms + write.ms
  })
  const ceilCpu = CPU.busy(ceilCpu0, CPU.snapshot(server.pid))
  writesDone += concCeiling.latencies.length

  log("floor of the model calls: one replay's requests from this process to the fake, sequentially")
  const sampleCalls = fake.requests.slice(-EXPECTED_REEXEC).map((r) => r.body)
  const floor = await modelFloor(fake, sampleCalls, 50)
  const loops = await modelLoops(server, run.resultTraceIds, 100)

  // Every generation completed and its result trace is stored with all its spans; every ceiling POST too.
  const stored = (
    await db.query<{ generations: string; completed: string; results: string; bad: string; extra: string }>(
      `WITH results AS (
       SELECT t.id, (SELECT count(*) FROM spans s WHERE s.trace_id = t.id) AS n FROM traces t WHERE t.fork_id IS NOT NULL
     )
     SELECT (SELECT count(*) FROM replay_generations) AS generations,
            (SELECT count(*) FROM replay_generations WHERE status = 'completed') AS completed,
            (SELECT count(*) FROM results) AS results,
            (SELECT count(*) FROM results WHERE n <> $1) AS bad,
            (SELECT count(*) FROM traces WHERE fork_id IS NULL) AS extra`,
      [EXPECTED_RESULT_SPANS]
    )
  ).rows[0]!
  if (
    Number(stored.generations) !== replaysDone ||
    Number(stored.completed) !== replaysDone ||
    Number(stored.results) !== replaysDone ||
    Number(stored.bad) !== 0 ||
    Number(stored.extra) !== CONCURRENCY + writesDone
  ) {
    fail(
      server,
      `stored ${stored.generations} generations (${stored.completed} completed), ${stored.results} result traces ` +
        `(${stored.bad} without ${EXPECTED_RESULT_SPANS} spans), ${stored.extra} other traces; expected ${replaysDone} ` +
        `replays and ${CONCURRENCY + writesDone} other traces`
    )
  }

  // ------------------------------------------------------------------------------------------ report
  const replayLat = latencyStats(run.replays)
  const pairLat = latencyStats(run.pairs)
  const readLat = latencyStats(run.reads)
  const writeLat = latencyStats(run.writes)
  const concLat = latencyStats(conc.latencies)
  const concPairLat = latencyStats(concCeiling.latencies)
  const sum = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0)
  // Sequential rates: completions per second spent in those requests (the rounds interleave both kinds).
  const seqReplayRate = run.replays.length / (sum(run.replays) / 1000)
  const seqPairRate = run.pairs.length / (sum(run.pairs) / 1000)
  const concReplayRate = conc.latencies.length / conc.seconds
  const concPairRate = concCeiling.latencies.length / concCeiling.seconds
  const calls = latencyStats(run.modelCalls)

  const shape = `${SPANS} spans, fork at span ${FORK_INDEX}: ${EXPECTED_BYTE_REPLAYED} copied, ${SPANS - EXPECTED_BYTE_REPLAYED} replayed`
  const rows: Array<[string, string, string, string, string]> = [
    [
      `Replays/s, sequential (${shape})`,
      `${fmtRate(seqReplayRate)} replays/s`,
      "—",
      `${fmtRate(seqPairRate)} (GET + POST)/s`,
      fmtRatio(seqPairRate / seqReplayRate)
    ],
    [
      `Replays/s, concurrency ${CONCURRENCY} (${CONCURRENCY} forks)`,
      `${fmtRate(concReplayRate)} replays/s`,
      "—",
      `${fmtRate(concPairRate)} (GET + POST)/s`,
      fmtRatio(concPairRate / concReplayRate)
    ],
    [
      "POST /api/v1/forks/{id}/replay latency p50 (sequential)",
      fmtMs(replayLat.p50),
      `≤ ${TARGET_REPLAY_P50_MS} ms${mark(replayLat.p50 <= TARGET_REPLAY_P50_MS)}`,
      fmtMs(pairLat.p50),
      fmtRatio(replayLat.p50 / pairLat.p50)
    ],
    [
      "POST /api/v1/forks/{id}/replay latency p95 (sequential)",
      fmtMs(replayLat.p95),
      "—",
      fmtMs(pairLat.p95),
      fmtRatio(replayLat.p95 / pairLat.p95)
    ],
    [
      "POST /api/v1/forks/{id}/replay latency p99 (sequential)",
      fmtMs(replayLat.p99),
      "—",
      fmtMs(pairLat.p99),
      fmtRatio(replayLat.p99 / pairLat.p99)
    ],
    [
      `POST /api/v1/forks/{id}/replay latency p50 (concurrency ${CONCURRENCY})`,
      fmtMs(concLat.p50),
      "—",
      fmtMs(concPairLat.p50),
      fmtRatio(concLat.p50 / concPairLat.p50)
    ],
    [
      `POST /api/v1/forks/{id}/replay latency p99 (concurrency ${CONCURRENCY})`,
      fmtMs(concLat.p99),
      "—",
      fmtMs(concPairLat.p99),
      fmtRatio(concLat.p99 / concPairLat.p99)
    ],
    [
      "Model calls per replay (requests the fake received)",
      calls.p50 === calls.p99 && calls.p50 === EXPECTED_REEXEC
        ? `${EXPECTED_REEXEC} (every replay)`
        : `${calls.p50}–${calls.p99}`,
      `= faithful_reexec (${EXPECTED_REEXEC})${mark(calls.p50 === EXPECTED_REEXEC && calls.p99 === EXPECTED_REEXEC)}`,
      `${fmtMs(floor.p50)} for ${EXPECTED_REEXEC} calls (p50, from this process)`,
      "—"
    ],
    [
      `└ inside the replay: its ${EXPECTED_REEXEC} model calls (result trace: when each ran, its duration) p50 / p99`,
      `${fmtMs(loops.p50)} / ${fmtMs(loops.p99)}`,
      "—",
      "—",
      "—"
    ],
    [
      `└ ceiling part: GET /api/v1/traces/{id} (${SPANS} spans) p50 / p99`,
      "—",
      "—",
      `${fmtMs(readLat.p50)} / ${fmtMs(readLat.p99)}`,
      "—"
    ],
    [
      `└ ceiling part: POST /api/v1/traces (the ${EXPECTED_RESULT_SPANS}-span result) p50 / p99`,
      "—",
      "—",
      `${fmtMs(writeLat.p50)} / ${fmtMs(writeLat.p99)}`,
      "—"
    ]
  ]

  const cpuLine = (name: string, c: CoresBusy) => `${name} ${fmtCores(c)}`
  const lines = [
    ...tableLines(["metric", "value", "target", "ceiling: GET source + POST result", "replay ÷ ceiling"], rows),
    "",
    `Command: \`${COMMAND}\``,
    "",
    `- Machine: ${availableParallelism()} CPUs, Bun ${Bun.version}, PostgreSQL ${pgVersion}; server \`bun src/app/main.ts\` in its own process on a fresh database${ANALYZE ? " (ANALYZE after the warm-up)" : ""}; fake OpenAI-compatible provider (instant answers) in this process.`,
    `- Source traces: ${SPANS} spans (${LLM_CALLS} llm_call of ${MODEL} with chat-message inputs, ${TOOL_CALLS} tool_call, ${SPANS - 1 - LLM_CALLS - TOOL_CALLS} reasoning/action, under an action root), ~${Math.round(spanBytes)} B of JSON per span, ${(sourceBodyBytes / 1024).toFixed(0)} KiB per trace. Fork at span ${FORK_INDEX} (${forkPointType}) with a modified input and \`${MOCKED_TOOL}\` mocked; each replay: byte_replayed ${EXPECTED_BYTE_REPLAYED}, faithful_reexec ${EXPECTED_REEXEC}, result trace of ${EXPECTED_RESULT_SPANS} spans (+ the fork_point span). Caveats reported: ${firstCaveats.length === 0 ? "none" : firstCaveats.map((c) => `"${c}"`).join("; ")}.`,
    `- Sequential: ${fmtInt(run.replays.length)} rounds in ${run.seconds.toFixed(1)} s after a ${WARMUP_SECONDS} s warm-up, each round one replay, then one GET of the source trace (${(run.readBytes / 1024).toFixed(0)} KiB response) and one POST of the replay's result trace under a fresh id (${(run.writeBytes / 1024).toFixed(0)} KiB body); sequential rates are completions ÷ time spent in those requests. Ratios: replay time ÷ ceiling time (throughput rows: ceiling rate ÷ replay rate); 1.00 would mean the replay costs no more than reading its source and writing its result.`,
    `- Concurrency ${CONCURRENCY}: ${fmtInt(conc.latencies.length)} replays in ${conc.seconds.toFixed(1)} s (${fmtInt(concCalls)} model calls), then ${fmtInt(concCeiling.latencies.length)} GET + POST pairs in ${concCeiling.seconds.toFixed(1)} s, one worker per fork / source trace.`,
    `- Checked: every replay answered 200, status "completed", mode "server", faithful_reexec ${EXPECTED_REEXEC}, byte_replayed ${EXPECTED_BYTE_REPLAYED}, with exactly ${EXPECTED_REEXEC} requests reaching the fake; all ${fmtInt(replaysDone)} generations stored as completed with ${EXPECTED_RESULT_SPANS}-span result traces, and all ${fmtInt(writesDone)} ceiling POSTs stored.`,
    `- Model calls: the ${EXPECTED_REEXEC} chat completion requests of one replay, sent sequentially from this process to the fake, take p50 ${fmtMs(floor.p50)}, p99 ${fmtMs(floor.p99)} (50 rounds): the floor of that part of every replay, which the ceiling does not include. Inside the server they took p50 ${fmtMs(loops.p50)} of the sequential replays (first re-executed llm_call's start to the last one's end in ${loops.n} result traces, millisecond timestamps).`,
    `- CPU, average cores busy of ${availableParallelism()} (server process / all postgres processes / this client and the fake / anything else): ` +
      [
        cpuLine("sequential rounds", seqCpu),
        cpuLine(`replays ×${CONCURRENCY}`, concCpu),
        cpuLine(`GET + POST ×${CONCURRENCY}`, ceilCpu)
      ].join("; ") +
      "."
  ]
  console.log(lines.join("\n"))
}

// After Ctrl-C the server is stopping: the request in flight failing then is expected, not news.
await runBench(main, { quietAfterSignal: true })
