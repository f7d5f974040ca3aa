import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { alignSpans, type ComparableSpan, depths } from "../../../src/ui/app/pages/compare/alignSpans.ts"
import { formatChange, traceDeltas } from "../../../src/ui/app/pages/compare/deltas.ts"
import { textDiff } from "../../../src/ui/app/pages/compare/textDiff.ts"

const span = (id: string, name: string, extra: Partial<ComparableSpan> = {}): ComparableSpan => ({
  id,
  parent_id: null,
  span_type: "llm_call",
  name,
  ...extra
})

/** Arbitrary traces: a few names (so sides share some), parents among earlier spans, inputs from a small set. */
const traceArb = (prefix: string) =>
  fc
    .array(
      fc.record({
        name: fc.constantFrom("plan", "search", "book", "answer", "reflect"),
        type: fc.constantFrom("llm_call", "tool_call"),
        parent: fc.nat(),
        input: fc.constantFrom("a", "b", { q: 1 }, undefined)
      }),
      { maxLength: 40 }
    )
    .map((items) =>
      items.map(
        (item, i): ComparableSpan => ({
          id: `${prefix}${i}`,
          parent_id: i === 0 || item.parent % 3 === 0 ? null : `${prefix}${item.parent % i}`,
          span_type: item.type,
          name: item.name,
          input: item.input
        })
      )
    )

const sidesOf = (rows: ReturnType<typeof alignSpans>["rows"]) => ({
  left: rows.flatMap((r) => ("left" in r ? [r.left.id] : [])),
  right: rows.flatMap((r) => ("right" in r ? [r.right.id] : []))
})

describe("alignSpans", () => {
  test("a trace aligned with itself pairs every span with itself, unchanged", () => {
    fc.assert(
      fc.property(traceArb("s"), (spans) => {
        const { rows, approximate } = alignSpans({ spans }, { spans })
        expect(approximate).toBe(false)
        expect(rows.length).toBe(spans.length)
        for (const row of rows) {
          expect(row.kind).toBe("same")
          if (row.kind === "same") expect(row.left.id).toBe(row.right.id)
        }
      })
    )
  })

  test("every span of each side appears exactly once, in causal order, and pairs share type and name", () => {
    fc.assert(
      fc.property(traceArb("l"), traceArb("r"), (a, b) => {
        const { rows } = alignSpans({ spans: a }, { spans: b })
        const { left, right } = sidesOf(rows)
        expect(left).toEqual(a.map((s) => s.id))
        expect(right).toEqual(b.map((s) => s.id))
        for (const row of rows) {
          if (row.kind === "same" || row.kind === "changed") {
            expect(row.left.name).toBe(row.right.name)
            expect(row.left.span_type).toBe(row.right.span_type)
          }
        }
      })
    )
  })

  test("the pairing is as long as possible: as many pairs as the longest common subsequence of (type, name)", () => {
    const lcsLength = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) => {
      const row = new Array<number>(b.length + 1).fill(0)
      for (const x of a) {
        let diagonal = 0
        for (let j = 1; j <= b.length; j++) {
          const above = row[j]!
          row[j] = x === b[j - 1] ? diagonal + 1 : Math.max(row[j]!, row[j - 1]!)
          diagonal = above
        }
      }
      return row[b.length]!
    }
    const key = (s: ComparableSpan) => `${s.span_type}/${s.name}`
    fc.assert(
      fc.property(traceArb("l"), traceArb("r"), (a, b) => {
        const paired = alignSpans({ spans: a }, { spans: b }).rows.filter(
          (r) => r.kind === "same" || r.kind === "changed"
        )
        expect(paired.length).toBe(lcsLength(a.map(key), b.map(key)))
      })
    )
  })

  test("a fork result: copied spans pair, the fork point is inserted, a re-executed call is changed", () => {
    const original = [
      span("1", "plan", { input: "go to Lisbon" }),
      span("2", "search", { span_type: "tool_call", parent_id: "1", output: ["Lisbon"] }),
      span("3", "answer", { parent_id: "1", output: "Lisbon it is" })
    ]
    const fork = [
      span("1", "plan", { input: "go to Lisbon" }),
      span("f", "fork", { span_type: "fork_point", parent_id: "1", input: "go to Porto" }),
      span("2", "search", { span_type: "tool_call", parent_id: "f", output: ["Lisbon"] }),
      span("4", "answer", { parent_id: "f", output: "Porto it is" })
    ]
    const { rows } = alignSpans({ spans: original, causalOrder: ["1", "2", "3"] }, { spans: fork })
    expect(rows.map((r) => r.kind)).toEqual(["same", "inserted", "same", "changed"])
    const search = rows[2]!
    expect(search.kind === "same" && [search.leftDepth, search.rightDepth]).toEqual([1, 2])
  })

  test("a removed span is shown as removed, not paired with a different name", () => {
    const { rows } = alignSpans(
      { spans: [span("1", "plan"), span("2", "search"), span("3", "answer")] },
      { spans: [span("a", "plan"), span("c", "answer")] }
    )
    expect(rows.map((r) => r.kind)).toEqual(["same", "removed", "same"])
  })

  test("the server's causal order wins over the listed order", () => {
    const spans = [span("1", "b"), span("2", "a")]
    const { rows } = alignSpans({ spans, causalOrder: ["2", "1"] }, { spans: [span("x", "a"), span("y", "b")] })
    expect(rows.map((r) => r.kind)).toEqual(["same", "same"])
  })

  test("the greedy alignment (past the time limit) also lists every span once, in order, pairing equal type and name", () => {
    fc.assert(
      fc.property(traceArb("l"), traceArb("r"), (a, b) => {
        const { rows, approximate } = alignSpans({ spans: a }, { spans: b }, { timeoutMs: 0 })
        expect(approximate).toBe(true)
        const { left, right } = sidesOf(rows)
        expect(left).toEqual(a.map((s) => s.id))
        expect(right).toEqual(b.map((s) => s.id))
        for (const row of rows) {
          if (row.kind === "same" || row.kind === "changed") expect(row.left.name).toBe(row.right.name)
        }
        // A trace against itself still pairs everything.
        expect(alignSpans({ spans: a }, { spans: a }, { timeoutMs: 0 }).rows.every((r) => r.kind === "same")).toBe(true)
      })
    )
  })

  test("too different to align in time: every span once, marked approximate", () => {
    const a = Array.from({ length: 3000 }, (_, i) => span(`a${i}`, `n${i}`))
    const b = Array.from({ length: 3000 }, (_, i) => span(`b${i}`, `m${i}`))
    const { rows, approximate } = alignSpans({ spans: a }, { spans: b }, { timeoutMs: 0 })
    expect(approximate).toBe(true)
    expect(rows.length).toBe(6000)
  })
})

describe("depths", () => {
  test("roots are 0, children one more; a parent cycle terminates", () => {
    const d = depths([
      span("1", "r"),
      span("2", "c", { parent_id: "1" }),
      span("x", "c", { parent_id: "y" }),
      span("y", "c", { parent_id: "x" })
    ])
    expect(d.get("1")).toBe(0)
    expect(d.get("2")).toBe(1)
    expect(d.has("x") && d.has("y")).toBe(true)
  })
})

describe("textDiff", () => {
  test("the parts rebuild both sides", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), fc.oneof(fc.string(), fc.json()), (x, y) => {
        const parts = textDiff(x, y)
        const left = parts
          .filter((p) => p.kind !== "added")
          .map((p) => p.text)
          .join("")
        const right = parts
          .filter((p) => p.kind !== "removed")
          .map((p) => p.text)
          .join("")
        expect(left).toBe(typeof x === "string" ? x : JSON.stringify(x, null, 2))
        expect(right).toBe(typeof y === "string" ? y : JSON.stringify(y, null, 2))
      })
    )
  })

  test("a changed word of a prompt is the only highlighted part", () => {
    expect(textDiff("Book Lisbon please", "Book Porto please")).toEqual([
      { kind: "same", text: "Book " },
      { kind: "removed", text: "Lisbon" },
      { kind: "added", text: "Porto" },
      { kind: "same", text: " please" }
    ])
  })

  test("inside replaced JSON lines, only the changed word is marked", () => {
    const parts = textDiff([{ role: "user", content: "Book Lisbon" }], [{ role: "user", content: "Book Porto" }])
    expect(parts.filter((p) => p.kind === "removed").map((p) => p.text)).toEqual(["Lisbon"])
    expect(parts.filter((p) => p.kind === "added").map((p) => p.text)).toEqual(["Porto"])
  })
})

describe("traceDeltas", () => {
  test("recorded totals, else summed from spans; output change by value, not key order", () => {
    const d = traceDeltas(
      { totalTokens: 100, totalCost: "0.0100", totalDurationMs: 2000, output: { a: 1, b: 2 }, spans: [] },
      {
        totalDurationMs: 1500,
        output: { b: 2, a: 1 },
        spans: [
          span("1", "x", { input_tokens: 30, output_tokens: 20, cost: 0.02, duration_ms: 700 }),
          span("2", "y", { span_type: "action", duration_ms: 5000 })
        ]
      }
    )
    expect(d.tokens).toEqual({ left: 100, right: 50, change: -50, ratio: -0.5 })
    expect(d.cost.change).toBeCloseTo(0.01)
    expect(d.latencyMs.change).toBe(-500)
    expect(d.callTimeMs).toEqual({ left: 0, right: 700, change: 700, ratio: null })
    expect(d.outputChanged).toBe(false)
    expect(formatChange(d.tokens)).toBe("−50 (−50%)")
    expect(formatChange({ left: 0, right: 3, change: 3, ratio: null })).toBe("+3")
    expect(formatChange({ left: 0.5, right: 0.25, change: -0.25, ratio: -0.5 }, (n) => `$${n.toFixed(2)}`)).toBe(
      "−$0.25 (−50%)"
    )
  })
})
