/**
 * The overload suite's prober, in its own thread: /health and the enforcement check every 100 ms, timed on an
 * event loop that the exporters' body building does not hold up. Started with `{ url, key }`; on "stop" it
 * posts `{ health, enforcement, failures }` (latencies in ms) and ends.
 */
declare const self: Worker

let running = true
self.onmessage = async (event: MessageEvent<{ url: string; key: string } | "stop">) => {
  if (event.data === "stop") {
    running = false
    return
  }
  const { key, url } = event.data
  const headers = { "content-type": "application/json", "x-service-key": key }
  const health: Array<number> = []
  const enforcement: Array<number> = []
  let failures = 0
  while (running) {
    for (const [samples, path, init] of [
      [health, "/health", {}],
      [enforcement, "/api/v1/enforcement/check", { method: "POST", headers, body: JSON.stringify({ run_id: "overload", tool_name: "t" }) }]
    ] as const) {
      const t0 = performance.now()
      try {
        const res = await fetch(`${url}${path}`, init)
        await res.arrayBuffer()
        if (res.status !== 200) failures++
      } catch {
        failures++
      }
      samples.push(performance.now() - t0)
    }
    await Bun.sleep(100)
  }
  self.postMessage({ health, enforcement, failures })
}
