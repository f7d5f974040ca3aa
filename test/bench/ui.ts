/**
 * Tapedeck Studio in Chromium (Debian's /usr/bin/chromium, driven by playwright-core), against the service in its own
 * process on a fresh database on the real PostgreSQL: a 10,000-span trace opened by URL until its tree and waterfall
 * are painted, scrolling that tree (frame times), selecting spans (click to inspector painted), the traces list's
 * first page painted with BENCH_UI_LIST_TRACES traces in the account, and the first load's JavaScript, gzipped.
 *
 *   bun test/bench/ui.ts        (BENCH_DATABASE_URL, BENCH_UI_LIST_TRACES, BENCH_UI_RUNS)
 *
 * Times are read in the page (performance.now(), from the navigation's start) once the frame that shows the awaited
 * element has been painted.
 */
import { cpus, loadavg } from "node:os"
import type { Page } from "playwright-core"
import { hasChromium, launchChromium } from "../support/Chromium.ts"
import {
  KEY,
  commandLine,
  connect,
  fmtInt,
  fmtMs,
  freshDatabase,
  latencyStats,
  log,
  mark,
  numberEnv,
  runBench,
  startServer,
  tableLines
} from "./Harness.ts"

const LIST_TRACES = numberEnv("BENCH_UI_LIST_TRACES", 1_000_000)
const RUNS = numberEnv("BENCH_UI_RUNS", 7)
const SPANS = 10_000
const TARGETS = { tracePaint: 1500, scrollP95: 20, select: 50, listPaint: 300, firstLoadKb: 350 }

/** A 10,000-span agent run: a root, 250 steps, each an LLM call with chat messages and tool calls nested 3 deep. */
const bigTraceSpans = (start: number) => {
  const spans: Array<Record<string, unknown>> = []
  const at = (ms: number) => new Date(start + ms).toISOString()
  const root = crypto.randomUUID()
  spans.push({
    id: root,
    parent_id: null,
    span_type: "action",
    name: "agent run",
    started_at: at(0),
    ended_at: at(600_000)
  })
  let t = 10
  for (let step = 0; spans.length < SPANS; step++) {
    const stepId = crypto.randomUUID()
    spans.push({
      id: stepId,
      parent_id: root,
      span_type: "llm_call",
      name: `plan step ${step}`,
      model: "gpt-4o",
      input_tokens: 800 + step,
      output_tokens: 120,
      cost: 0.004,
      started_at: at(t),
      ended_at: at(t + 1500),
      input: {
        messages: [
          { role: "system", content: "You are a careful travel agent." },
          { role: "user", content: `Step ${step}: find the next leg.` }
        ]
      },
      output: {
        role: "assistant",
        content: "Searching.",
        tool_calls: [{ id: `call_${step}`, type: "function", function: { name: "search", arguments: '{"q":"LIS"}' } }]
      },
      agent_id: "planner"
    })
    for (let tool = 0; tool < 13 && spans.length < SPANS; tool++) {
      const toolId = crypto.randomUUID()
      const toolStart = t + 100 + tool * 100
      spans.push({
        id: toolId,
        parent_id: stepId,
        span_type: "tool_call",
        name: `search_flights ${tool}`,
        started_at: at(toolStart),
        ended_at: at(toolStart + 250),
        input: { to: "LIS", day: tool },
        ...(tool === 7 && step % 10 === 0 ? { error: "timeout" } : {})
      })
      if (spans.length < SPANS) {
        spans.push({
          id: crypto.randomUUID(),
          parent_id: toolId,
          span_type: "tool_result",
          name: "results",
          started_at: at(toolStart + 200),
          ended_at: at(toolStart + 240),
          output: { flights: [{ id: "TP123", price: 210 }] }
        })
      }
      if (spans.length < SPANS && tool % 4 === 0) {
        spans.push({
          id: crypto.randomUUID(),
          parent_id: toolId,
          span_type: "reasoning",
          name: "compare fares",
          started_at: at(toolStart + 10),
          ended_at: at(toolStart + 60)
        })
      }
    }
    t += 2400
  }
  return spans
}

const post = async (url: string, method: string, body: unknown) => {
  const response = await fetch(url, {
    method,
    headers: { "x-service-key": KEY, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  if (response.status !== 200) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`)
  return response.json()
}

/**
 * In the page: resolves with performance.now() once `selector` matches and the frame showing it is painted (a task
 * queued from the frame's animation callback runs after that frame's paint).
 */
const paintedWhen = (selector: string) => `new Promise((resolve) => {
  const check = () => document.querySelector(${JSON.stringify(selector)})
    ? requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0))
    : requestAnimationFrame(check)
  check()
})`

/** In the page: how long the last API call whose URL contains `part` took, from its start to its last byte. */
const apiMs = (page: Page, part: string) =>
  page.evaluate(`(() => {
    const entries = performance.getEntriesByType("resource").filter((e) => e.name.includes(${JSON.stringify(part)}))
    const last = entries[entries.length - 1]
    return last === undefined ? NaN : last.responseEnd - last.startTime
  })()`) as Promise<number>

const signedInPage = async (browser: Awaited<ReturnType<typeof launchChromium>>) => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } })
  await context.addInitScript(`sessionStorage.setItem("tapedeck.studio.key", ${JSON.stringify(KEY)})`)
  return { context, page: await context.newPage() }
}

const timeNavigation = async (page: Page, url: string, selector: string) => {
  await page.goto(url, { waitUntil: "commit" })
  return (await page.evaluate(paintedWhen(selector))) as number
}

runBench(async () => {
  if (!hasChromium) throw new Error("no Chromium at /usr/bin/chromium (apt-get install chromium)")
  const { databaseUrl, pgVersion } = await freshDatabase("tapedeck_bench_ui_")
  const server = await startServer(databaseUrl)
  const db = await connect(databaseUrl)
  log(`server up at ${server.url} (PostgreSQL ${pgVersion})`)

  // The list's traces, written straight into the table (the API's write path is measured elsewhere).
  const account = (await db.query<{ id: string }>("SELECT account_id AS id FROM api_keys LIMIT 1")).rows[0]!.id
  const t0 = performance.now()
  for (let done = 0; done < LIST_TRACES; done += 100_000) {
    const n = Math.min(100_000, LIST_TRACES - done)
    await db.query(
      `INSERT INTO traces (id, account_id, name, status, total_tokens, total_cost, total_duration_ms, span_count, started_at, ended_at, models, has_error)
       SELECT gen_random_uuid(), $1, 'bench run ' || g, CASE WHEN g % 17 = 0 THEN 'failed' ELSE 'completed' END,
              1000 + g % 5000, (g % 100) / 1000.0, 500 + g % 30000, 5 + g % 40,
              now() - interval '1 hour' - (g * interval '1 second'), now() - interval '1 hour' - (g * interval '1 second') + interval '2 seconds',
              ARRAY['gpt-4o'], g % 17 = 0
       FROM generate_series($2::int, $3::int) g`,
      [account, done + 1, done + n]
    )
    log(`seeded ${fmtInt(done + n)} / ${fmtInt(LIST_TRACES)} traces`)
  }
  await db.query("ANALYZE traces")
  const seedSeconds = (performance.now() - t0) / 1000

  // The 10,000-span trace, through the API: created running with 1,000 spans, 9 appends, then finished.
  const traceId = crypto.randomUUID()
  const start = Date.now() - 700_000
  const spans = bigTraceSpans(start)
  await post(`${server.url}/api/v1/traces`, "POST", {
    id: traceId,
    name: "bench: 10,000 spans",
    started_at: new Date(start).toISOString(),
    spans: spans.slice(0, 1000)
  })
  for (let i = 1000; i < spans.length; i += 1000)
    await post(`${server.url}/api/v1/traces/${traceId}/spans`, "POST", { spans: spans.slice(i, i + 1000) })
  await post(`${server.url}/api/v1/traces/${traceId}`, "PATCH", {
    status: "completed",
    ended_at: new Date(start + 600_000).toISOString()
  })
  log(`10,000-span trace ${traceId} recorded`)

  const browser = await launchChromium()
  try {
    // First load, cold cache: the JavaScript the list page needs, as sent (gzip).
    const cold = await signedInPage(browser)
    const coldListMs = await timeNavigation(cold.page, `${server.url}/ui/traces`, "table[aria-label=Traces] tbody tr")
    const scripts = (await cold.page.evaluate(`performance.getEntriesByType("resource")
      .filter((e) => e.initiatorType === "script" || e.name.endsWith(".js"))
      .map((e) => ({ name: e.name, encoded: e.encodedBodySize, decoded: e.decodedBodySize }))`)) as Array<{
      name: string
      encoded: number
      decoded: number
    }>
    const firstLoadKb = scripts.reduce((sum, s) => sum + s.encoded, 0) / 1024
    const firstLoadRawKb = scripts.reduce((sum, s) => sum + s.decoded, 0) / 1024
    await cold.context.close()

    const { context, page } = await signedInPage(browser)
    // The list's first page, warm cache (a returning user), RUNS times.
    await timeNavigation(page, `${server.url}/ui/traces`, "table[aria-label=Traces] tbody tr")
    const listPaint: Array<number> = []
    const listApi: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      listPaint.push(await timeNavigation(page, `${server.url}/ui/traces`, "table[aria-label=Traces] tbody tr"))
      listApi.push(await apiMs(page, "/api/v1/traces?"))
    }
    const filteredPaint: Array<number> = []
    const filteredApi: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      filteredPaint.push(
        await timeNavigation(
          page,
          `${server.url}/ui/traces?status=failed&name=run%2012`,
          "table[aria-label=Traces] tbody tr"
        )
      )
      filteredApi.push(await apiMs(page, "/api/v1/traces?"))
    }

    // The 10,000-span trace opened by URL, RUNS times.
    const tracePaint: Array<number> = []
    const traceApi: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      tracePaint.push(
        await timeNavigation(page, `${server.url}/ui/traces/${traceId}`, "[role=tree] [role=treeitem] .bar")
      )
      traceApi.push(await apiMs(page, `/api/v1/traces/${traceId}`))
    }
    const rowsInDom = (await page.evaluate(`document.querySelectorAll("[role=treeitem]").length`)) as number

    // Scrolling the tree: a steady wheel-like scroll (3 rows a frame), then a fling (a screenful a frame).
    const scrollFrames = (step: number, frames: number) =>
      page.evaluate(`new Promise((resolve) => {
        const scroller = document.querySelector(".span-scroll")
        const times = []
        let last = performance.now()
        let n = 0
        const frame = (now) => {
          times.push(now - last)
          last = now
          scroller.scrollTop += ${step}
          if (++n < ${frames}) requestAnimationFrame(frame)
          else resolve(times.slice(2))
        }
        requestAnimationFrame((now) => { last = now; requestAnimationFrame(frame) })
      })`) as Promise<Array<number>>
    const steady = latencyStats(await scrollFrames(72, 300))
    await page.evaluate(`document.querySelector(".span-scroll").scrollTop = 0`)
    const fling = latencyStats(await scrollFrames(800, 200))

    // Selecting spans: a click on a row in view until the inspector shows its name, painted.
    await page.evaluate(`document.querySelector(".span-scroll").scrollTop = 24 * 2000`)
    await page.evaluate(paintedWhen("[role=treeitem]"))
    const selects = (await page.evaluate(`(async () => {
      const samples = []
      for (let i = 0; i < ${RUNS * 4}; i++) {
        const rows = [...document.querySelectorAll("[role=treeitem]")].filter((r) => r.getAttribute("aria-selected") !== "true")
        const row = rows[(i * 7) % rows.length]
        const name = row.getAttribute("aria-label")
        const t0 = performance.now()
        row.click()
        await new Promise((resolve) => {
          const check = () => document.querySelector("[aria-label='Span inspector'] h2")?.textContent === name
            ? requestAnimationFrame(() => setTimeout(resolve, 0))
            : requestAnimationFrame(check)
          check()
        })
        samples.push(performance.now() - t0)
        await new Promise((r) => setTimeout(r, 30))
      }
      return samples
    })()`)) as Array<number>
    const select = latencyStats(selects)
    await context.close()

    // Ceilings, in the same browser and hour: a page without script painted after navigation; frames with no work at
    // all; scrolling a static, fully built 10,000-row list (no script per frame but the scroll); a one-node DOM
    // change painted.
    const bare = await browser.newPage({ viewport: { width: 1440, height: 900 } })
    const blankPaint: Array<number> = []
    for (let i = 0; i < RUNS; i++) blankPaint.push(await timeNavigation(bare, `${server.url}/health`, "body"))
    const idle = latencyStats(
      (await bare.evaluate(`new Promise((resolve) => {
      const times = []
      let last = performance.now()
      const frame = (now) => { times.push(now - last); last = now; times.length < 300 ? requestAnimationFrame(frame) : resolve(times.slice(2)) }
      requestAnimationFrame((now) => { last = now; requestAnimationFrame(frame) })
    })`)) as Array<number>
    )
    await bare.setContent(
      `<div id="s" style="height:800px;overflow:auto;font:13px system-ui">${Array.from(
        { length: 10_000 },
        (_, i) =>
          `<div style="height:24px;display:flex;gap:8px"><span>span ${i}</span><span style="margin-left:${(i * 7) % 400}px;width:${20 + (i % 90)}px;background:#5b8def"></span></div>`
      ).join("")}</div>`
    )
    const staticScroll = latencyStats(
      (await bare.evaluate(`new Promise((resolve) => {
      const scroller = document.getElementById("s")
      const times = []
      let last = performance.now()
      const frame = (now) => { times.push(now - last); last = now; scroller.scrollTop += 72; times.length < 300 ? requestAnimationFrame(frame) : resolve(times.slice(2)) }
      requestAnimationFrame((now) => { last = now; requestAnimationFrame(frame) })
    })`)) as Array<number>
    )
    const domChange = latencyStats(
      (await bare.evaluate(`(async () => {
      const samples = []
      const node = document.createElement("h2")
      document.body.prepend(node)
      for (let i = 0; i < 28; i++) {
        const t0 = performance.now()
        node.textContent = "span " + i
        await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)))
        samples.push(performance.now() - t0)
        await new Promise((r) => setTimeout(r, 30))
      }
      return samples
    })()`)) as Array<number>
    )
    await bare.close()
    const blank = latencyStats(blankPaint)

    const trace = latencyStats(tracePaint)
    const list = latencyStats(listPaint)
    const filtered = latencyStats(filteredPaint)
    const ok = (value: number, target: number) => `${fmtMs(value)}${mark(value <= target)}`
    const lines = [
      "",
      `## Tapedeck Studio in Chromium (${commandLine(["BENCH_DATABASE_URL", "BENCH_UI_LIST_TRACES", "BENCH_UI_RUNS"], "test/bench/ui.ts")})`,
      "",
      `PostgreSQL ${pgVersion}; ${fmtInt(LIST_TRACES)} traces in the account (seeded in ${seedSeconds.toFixed(0)} s); a ${fmtInt(spans.length)}-span trace; ${RUNS} runs each; headless Chromium, software rendering, 1440×900.`,
      "",
      ...tableLines(
        ["metric", "value", "target", "ceiling (same run)", "note"],
        [
          [
            "10,000-span trace: navigation → tree and waterfall painted, p50 / max",
            `${fmtMs(trace.p50)} / ${ok(Math.max(...tracePaint), TARGETS.tracePaint)}`,
            fmtMs(TARGETS.tracePaint),
            `${fmtMs(blank.p50)} (a page without script, p50)`,
            `full page load from the URL (JS cached); of which the API call p50 ${fmtMs(latencyStats(traceApi).p50)}; ${rowsInDom} rows in the DOM`
          ],
          [
            "tree scroll, 3 rows a frame: frame time p50 / p95",
            `${fmtMs(steady.p50)} / ${ok(steady.p95, TARGETS.scrollP95)}`,
            fmtMs(TARGETS.scrollP95),
            `${fmtMs(staticScroll.p50)} / ${fmtMs(staticScroll.p95)} (static 10,000-row list); idle frames ${fmtMs(idle.p50)} / ${fmtMs(idle.p95)}`,
            `${steady.n} frames`
          ],
          [
            "tree scroll, a screenful a frame: frame time p50 / p95",
            `${fmtMs(fling.p50)} / ${ok(fling.p95, TARGETS.scrollP95)}`,
            fmtMs(TARGETS.scrollP95),
            "as above",
            `${fling.n} frames, every row new each frame`
          ],
          [
            "span click → inspector painted, p50 / p95",
            `${fmtMs(select.p50)} / ${ok(select.p95, TARGETS.select)}`,
            fmtMs(TARGETS.select),
            `${fmtMs(domChange.p50)} / ${fmtMs(domChange.p95)} (one text node changed, painted)`,
            `${select.n} selections in a 10,000-span trace`
          ],
          [
            "traces list: navigation → first page painted, p50 / max",
            `${fmtMs(list.p50)} / ${ok(Math.max(...listPaint), TARGETS.listPaint)}`,
            fmtMs(TARGETS.listPaint),
            `${fmtMs(blank.p50)} (a page without script, p50)`,
            `${fmtInt(LIST_TRACES)} traces, JS cached; of which the API call p50 ${fmtMs(latencyStats(listApi).p50)}`
          ],
          [
            "traces list filtered (status + name contains), p50 / max",
            `${fmtMs(filtered.p50)} / ${ok(Math.max(...filteredPaint), TARGETS.listPaint)}`,
            fmtMs(TARGETS.listPaint),
            "as above",
            `JS cached; of which the API call p50 ${fmtMs(latencyStats(filteredApi).p50)}`
          ],
          [
            "traces list, first visit (nothing cached)",
            ok(coldListMs, TARGETS.listPaint),
            fmtMs(TARGETS.listPaint),
            "as above",
            "includes downloading and compiling the bundle"
          ],
          [
            "first-load JavaScript, gzipped",
            `${firstLoadKb.toFixed(1)} KB${mark(firstLoadKb <= TARGETS.firstLoadKb)}`,
            `${TARGETS.firstLoadKb} KB`,
            "—",
            `${scripts.length} file(s), ${firstLoadRawKb.toFixed(0)} KB uncompressed`
          ]
        ]
      ),
      "",
      `Machine: ${cpus().length} cores, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" / ")} at the end of the run (shared with other work).`
    ]
    console.log(lines.join("\n"))
  } finally {
    await browser.close()
  }
})
