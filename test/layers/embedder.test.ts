import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Option, Redacted } from "effect"
import { makeOfflineEmbedding, OFFLINE_DIMS, tokenize } from "#layers/search/OfflineEmbedder"
import { makeOpenAiEmbedder } from "#layers/search/OpenAiEmbedder"
import { spanText } from "#src/domain/search/SpanText"
import { compact, COMPACT_FILE, decode, loadWordVectors, WORD_DIMS, type WordVectors } from "#layers/search/WordVectors"

const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i]!, 0)

describe("word vectors: compaction", () => {
  /** A file in the package's format: frequency-ordered words, then "word": [100 values, norm, index]. */
  const synthetic = () => {
    const dir = mkdtempSync(join(tmpdir(), "tapedeck-wv-"))
    const words = ["the", ",", "timeout", "Payment", "flight", "x-y", "hotel"]
    const vectors: Record<string, Array<number>> = {}
    words.forEach((w, i) => {
      vectors[w] = [...Array.from({ length: WORD_DIMS }, (_, d) => Math.sin(i * 31 + d) * (i + 1)), 1, i]
    })
    const source = join(dir, "vectors.json")
    writeFileSync(source, JSON.stringify({ precision: 8, size: words.length, dimensions: 100, words, vectors }))
    return { dir, source, vectors }
  }

  test("keeps lowercase alphanumeric words in frequency order, int8 with a per-vector scale", async () => {
    const { source, vectors } = synthetic()
    const wv = decode(await compact(source))
    expect([...wv.index.keys()]).toEqual(["the", "timeout", "flight", "hotel"])
    expect([...wv.ranks]).toEqual([0, 2, 4, 6])
    const row = wv.index.get("flight")!
    const original = vectors.flight!
    for (let d = 0; d < WORD_DIMS; d++) {
      const restored = wv.vectors[row * WORD_DIMS + d]! * wv.scales[row]!
      expect(Math.abs(restored - original[d]!)).toBeLessThanOrEqual(wv.scales[row]! / 2 + 1e-6)
    }
    expect(() => decode(new Uint8Array([1, 2, 3]))).toThrow()
  })

  test("loads from the cache once written; two loaders at once compact once and agree", async () => {
    const { dir, source } = synthetic()
    const cache = join(dir, "cache")
    const logs: Array<string> = []
    const [a, b] = await Promise.all([
      loadWordVectors("memory://", (m) => logs.push(m), { source, dirs: [cache] }),
      loadWordVectors("memory://", (m) => logs.push(m), { source, dirs: [cache] })
    ])
    expect([...a.index.keys()]).toEqual([...b.index.keys()])
    expect(logs.filter((m) => m.startsWith("compacting")).length).toBe(1)
    // Only the final file is left: no temporary file, no lock.
    expect(readdirSync(cache).length).toBe(1)
    const again = await loadWordVectors("memory://", (m) => logs.push(m), { source: "/nonexistent", dirs: [cache] })
    expect(again.count).toBe(a.count)
  })

  test("a lock left by a killed process is taken over at once; a live holder's lock is waited for", async () => {
    const { dir, source } = synthetic()
    const cache = join(dir, "cache")
    mkdirSync(cache)
    const lock = join(cache, `${COMPACT_FILE}.lock`)
    const gone = Bun.spawnSync(["true"]).pid // exited: its id names no process
    writeFileSync(lock, String(gone))
    const started = Date.now()
    const loaded = await loadWordVectors("memory://", () => {}, { source, dirs: [cache] })
    expect(loaded.count).toBe(4)
    expect(Date.now() - started).toBeLessThan(5_000) // not the two minutes of an abandoned lock
    expect(readdirSync(cache)).toEqual([COMPACT_FILE])

    // A live holder (a sleeping child process): the loader waits until the holder's file appears.
    const other = join(dir, "other")
    mkdirSync(other)
    const holder = Bun.spawn(["sleep", "30"])
    writeFileSync(join(other, `${COMPACT_FILE}.lock`), String(holder.pid))
    const waiting = loadWordVectors("memory://", () => {}, { source, dirs: [other] })
    const settled = await Promise.race([waiting.then(() => "loaded"), Bun.sleep(1_000).then(() => "waiting")])
    expect(settled).toBe("waiting")
    writeFileSync(join(other, COMPACT_FILE), readFileSync(join(cache, COMPACT_FILE)))
    expect((await waiting).count).toBe(4)
    holder.kill()
  })
})

describe("offline embedder", () => {
  let wv: WordVectors
  let embed: (text: string) => Float32Array
  beforeAll(async () => {
    wv = await loadWordVectors("memory://")
    embed = makeOfflineEmbedding(wv)
  }, 120_000)

  test("splits identifiers at underscores, dots and case changes, and keeps the whole identifier", () => {
    const parts: Array<string> = []
    const identifiers: Array<string> = []
    tokenize(
      "getUserById payment_intent.failed ETIMEDOUT HTTP429",
      (p) => parts.push(p),
      (i) => identifiers.push(i)
    )
    expect(parts).toEqual(["get", "user", "by", "id", "payment", "intent", "failed", "etimedout", "http", "429"])
    expect(identifiers).toEqual(["getuserbyid", "payment_intent", "http429"])
  })

  test("unit length, fixed dimension, deterministic; an empty text is the zero vector", () => {
    const v = embed("The card was declined by the bank")
    expect(v.length).toBe(OFFLINE_DIMS)
    expect(Math.abs(Math.hypot(...v) - 1)).toBeLessThan(1e-5)
    expect([...embed("The card was declined by the bank")]).toEqual([...v])
    expect(Math.hypot(...embed(""))).toBe(0)
    expect(Math.abs(Math.hypot(...embed("zqxv_kwpl")) - 1)).toBeLessThan(1e-5)
  })

  test("related texts are closer than unrelated ones, including through identifiers and unknown words", () => {
    const timeout = embed("request to the inventory service timed out after 30 seconds")
    expect(dot(timeout, embed("ETIMEDOUT upstream did not respond, gave up"))).toBeGreaterThan(
      dot(timeout, embed("I booked a double room in a hotel in Porto"))
    )
    const flight = embed("book a flight to Lisbon")
    expect(dot(flight, embed("search_flights airline TAP departure 09:40"))).toBeGreaterThan(
      dot(flight, embed("SELECT region, SUM(amount) FROM sales GROUP BY region"))
    )
    expect(dot(embed("stripeChargeFailed"), embed("stripe charge failed"))).toBeGreaterThan(0.5)
  })

  test("the text of a span: name, type, model, error, trimmed payloads; at most about 5 kB", () => {
    const text = spanText({
      name: "charge_card",
      span_type: "tool_call",
      model: null,
      input: { messages: [{ role: "user", content: "pay" }], card_number: "4242", amount: 10 },
      output: "x".repeat(100_000),
      error: "card_declined"
    })
    expect(text).toContain("charge_card")
    expect(text).toContain("tool call")
    expect(text).toContain("card_declined")
    expect(text).toContain("card_number 4242")
    expect(text).not.toContain("role")
    expect(text.length).toBeLessThan(5000)
  })

  test("embeds at least 2,000 typical spans per second on one core", () => {
    const texts = Array.from({ length: 2000 }, (_, i) =>
      spanText({
        name: `tool_${i % 17}`,
        span_type: "tool_call",
        model: "gpt-4o-mini",
        input: { query: `find flights to city ${i}`, passengers: 2 },
        output: { results: [{ airline: "TAP", fare: 320 + i, note: "the fare includes one checked bag and a seat" }] },
        error: i % 5 === 0 ? "ETIMEDOUT: upstream timed out after 30000 ms" : null
      })
    )
    const started = performance.now()
    for (const t of texts) embed(t)
    const perSecond = texts.length / ((performance.now() - started) / 1000)
    console.log(`offline embedder: ${Math.round(perSecond)} spans/s`)
    expect(perSecond).toBeGreaterThan(500) // a loose floor for shared CI machines; the benchmark measures for real
  })
})

describe("OpenAI-compatible embedder against a fake /embeddings server", () => {
  const requests: Array<{ headers: Headers; body: any }> = []
  let script: (call: number, body: any) => Response | Promise<Response> = () => new Response("{}")
  let server: ReturnType<typeof Bun.serve>
  const fakeVector = (text: string) => [text.length, 1, text.includes("timeout") ? 5 : 0]
  const ok = (body: any) =>
    Response.json({
      object: "list",
      // Out of order on purpose: `index` says which input each vector is for.
      data: body.input
        .map((t: string, index: number) => ({ object: "embedding", index, embedding: fakeVector(t) }))
        .reverse(),
      model: body.model
    })
  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        const body = await request.json()
        requests.push({ headers: request.headers, body })
        if (new URL(request.url).pathname !== "/v1/embeddings") return new Response("not found", { status: 404 })
        return script(requests.length - 1, body)
      }
    })
  })
  afterAll(() => server.stop(true))

  const make = (overrides: Partial<Parameters<typeof makeOpenAiEmbedder>[0]> = {}) =>
    makeOpenAiEmbedder({
      baseUrl: `http://127.0.0.1:${server.port}/v1`,
      model: "nomic-embed-text",
      apiKey: Option.some(Redacted.make("sk-secret-123")),
      dimensions: Option.none(),
      batchSize: 3,
      timeoutMs: 2000,
      maxRetries: 2,
      ...overrides
    })
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect))

  test("batches, sends the model and the key, orders by index and L2-normalises", async () => {
    requests.length = 0
    script = (_, body) => ok(body)
    const embedder = make()
    expect(embedder.id).toBe("openai-compatible:nomic-embed-text")
    const result = await run(embedder.embed(["a", "bb", "timeout", "dddd", "e", "ff", "g"]))
    expect(result._tag).toBe("Right")
    const vectors = result._tag === "Right" ? result.right : []
    expect(requests.map((r) => r.body.input.length)).toEqual([3, 3, 1])
    expect(requests[0]!.body.model).toBe("nomic-embed-text")
    expect(requests[0]!.headers.get("authorization")).toBe("Bearer sk-secret-123")
    expect(vectors.length).toBe(7)
    const expected = fakeVector("timeout")
    const norm = Math.hypot(...expected)
    expect([...vectors[2]!].map((x) => Math.round(x * 1e5))).toEqual(expected.map((x) => Math.round((x / norm) * 1e5)))
  })

  test("retries 429 and 5xx, then succeeds", async () => {
    requests.length = 0
    script = (call, body) => (call < 2 ? new Response("busy", { status: call === 0 ? 429 : 503 }) : ok(body))
    const result = await run(make().embed(["x"]))
    expect(result._tag).toBe("Right")
    expect(requests.length).toBe(3)
  })

  test("a 4xx, a malformed answer, a wrong count or a timeout is EmbedderUnavailable, never with the key", async () => {
    const cases: Array<[typeof script, RegExp]> = [
      [
        () => new Response(JSON.stringify({ error: { message: "bad key sk-secret-123" } }), { status: 401 }),
        /HTTP 401/
      ],
      [() => new Response("not json"), /not JSON/],
      [() => Response.json({ data: [] }), /one embedding per input/],
      [() => Response.json({ data: [{ embedding: [1, 2] }, { embedding: [1] }] }), /differing sizes/],
      [
        async (_c, body) => {
          await Bun.sleep(1500)
          return ok(body)
        },
        /could not reach/
      ]
    ]
    for (const [reply, message] of cases) {
      requests.length = 0
      script = reply
      const started = Date.now()
      const result = await run(make({ timeoutMs: 300, maxRetries: 0 }).embed(["x", "y"]))
      expect(result._tag).toBe("Left")
      if (result._tag === "Left") {
        expect(result.left._tag).toBe("EmbedderUnavailable")
        expect(result.left.reason).toMatch(message)
        expect(result.left.reason).not.toContain("sk-secret-123")
      }
      expect(Date.now() - started).toBeLessThan(1400)
    }
  })

  test("a configured dimension is requested and becomes part of the embedder id", async () => {
    requests.length = 0
    script = (_, body) =>
      Response.json({ data: body.input.map((_t: string, index: number) => ({ index, embedding: [1, 0, 0] })) })
    const embedder = make({ dimensions: Option.some(3) })
    expect(embedder.id).toBe("openai-compatible:nomic-embed-text:3")
    expect((await run(embedder.embed(["x"])))._tag).toBe("Right")
    expect(requests[0]!.body.dimensions).toBe(3)
  })
})
