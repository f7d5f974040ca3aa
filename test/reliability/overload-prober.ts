/**
 * The overload suite's prober, in its own thread: /health and the enforcement check every 100 ms, timed on an
 * event loop that the exporters' body building does not hold up, on the server and on the ceiling beside it.
 * Started with `{ url, key, ceilingUrl }`; on "stop" it posts `{ health, enforcement, ceilingHealth,
 * ceilingEnforcement, failures }` (latencies in ms) and ends.
 */
declare const self: Worker

let running = true
self.onmessage = async (event: MessageEvent<{ url: string; key: string; ceilingUrl: string } | "stop">) => {
  if (event.data === "stop") {
    running = false
    return
  }
  const { ceilingUrl, key, url } = event.data
  const headers = { "content-type": "application/json", "x-service-key": key }
  const check = { method: "POST", headers, body: JSON.stringify({ run_id: "overload", tool_name: "t" }) }
  const health: Array<number> = []
  const enforcement: Array<number> = []
  const ceilingHealth: Array<number> = []
  const ceilingEnforcement: Array<number> = []
  let failures = 0
  while (running) {
    for (const [samples, target, path, init] of [
      [health, url, "/health", {}],
      [enforcement, url, "/api/v1/enforcement/check", check],
      [ceilingHealth, ceilingUrl, "/health", {}],
      [ceilingEnforcement, ceilingUrl, "/api/v1/enforcement/check", check]
    ] as const) {
      const t0 = performance.now()
      try {
        const res = await fetch(`${target}${path}`, init)
        await res.arrayBuffer()
        if (res.status !== 200) failures++
      } catch {
        failures++
      }
      samples.push(performance.now() - t0)
    }
    await Bun.sleep(100)
  }
  self.postMessage({ health, enforcement, ceilingHealth, ceilingEnforcement, failures })
}
