import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import {
  buildSpanTree,
  revealing,
  type SpanLike,
  treeKey,
  visibleRows
} from "../../../src/ui/app/pages/trace/spanTree.ts"

const T0 = Date.UTC(2026, 0, 1)

/** A span as the views read it: `parent` is an index into the earlier spans (or a missing / later id). */
const span = (
  id: string,
  parent: string | null,
  startOffset: number,
  duration: number,
  extra: Partial<SpanLike> = {}
): SpanLike => ({
  id,
  parent_id: parent,
  span_type: "action",
  name: `span ${id}`,
  started_at: new Date(T0 + startOffset),
  ended_at: new Date(T0 + startOffset + duration),
  ...extra
})

/** Random traces: each span's parent is an earlier span, none, a missing id, or (rarely) a later one (cycles). */
const traces = fc
  .array(
    fc.record({
      parentPick: fc.integer({ min: -2, max: 200 }),
      start: fc.integer({ min: 0, max: 10_000 }),
      duration: fc.integer({ min: 0, max: 5_000 }),
      tokens: fc.integer({ min: 0, max: 1000 }),
      failed: fc.boolean()
    }),
    { minLength: 0, maxLength: 60 }
  )
  .map((rows) =>
    rows.map((row, i) => {
      const parent =
        row.parentPick === -2
          ? "00000000-0000-0000-0000-000000000000"
          : row.parentPick === -1 || rows.length === 0
            ? null
            : `s${row.parentPick % rows.length}`
      return span(`s${i}`, parent === `s${i}` ? null : parent, row.start, row.duration, {
        input_tokens: row.tokens,
        ...(row.failed ? { error: "boom" } : {})
      })
    })
  )

const subtreeSize = (tree: ReturnType<typeof buildSpanTree>, id: string): number => {
  const node = tree.byId.get(id)!
  return 1 + node.children.reduce((sum, child) => sum + subtreeSize(tree, child.id), 0)
}

describe("buildSpanTree", () => {
  test("every span appears exactly once, parents before children, depths and roll-ups consistent", () => {
    fc.assert(
      fc.property(traces, (spans) => {
        const tree = buildSpanTree(spans)
        expect(tree.nodes.length).toBe(spans.length)
        expect(new Set(tree.nodes.map((n) => n.id)).size).toBe(spans.length)
        const position = new Map(tree.nodes.map((n, i) => [n.id, i]))
        let rootSpans = 0
        for (const node of tree.nodes) {
          if (node.parent === undefined) {
            expect(node.depth).toBe(0)
            rootSpans += node.rollup.spans
          } else {
            expect(position.get(node.parent.id)!).toBeLessThan(position.get(node.id)!)
            expect(node.depth).toBe(node.parent.depth + 1)
            expect(node.span.parent_id).toBe(node.parent.id)
          }
          expect(node.rollup.spans).toBe(subtreeSize(tree, node.id))
          expect(node.rollup.endMs).toBeGreaterThanOrEqual(node.endMs)
        }
        expect(rootSpans).toBe(spans.length)
        const tokens = spans.reduce((sum, s) => sum + (s.input_tokens ?? 0), 0)
        expect(tree.roots.reduce((sum, r) => sum + r.rollup.tokens, 0)).toBe(tokens)
        expect(tree.roots.reduce((sum, r) => sum + r.rollup.errors, 0)).toBe(spans.filter((s) => s.error).length)
      }),
      { numRuns: 300 }
    )
  })

  test("collapsing a span hides exactly its descendants, and revealing a span shows it", () => {
    fc.assert(
      fc.property(traces, fc.array(fc.nat(), { maxLength: 5 }), fc.nat(), (spans, picks, target) => {
        fc.pre(spans.length > 0)
        const tree = buildSpanTree(spans)
        const collapsed = new Set(picks.map((p) => tree.nodes[p % tree.nodes.length]!.id))
        const rows = visibleRows(tree, collapsed)
        const shown = new Set(rows.map((r) => r.id))
        for (const node of tree.nodes) {
          let hidden = false
          for (let a = node.parent; a !== undefined; a = a.parent) if (collapsed.has(a.id)) hidden = true
          expect(shown.has(node.id)).toBe(!hidden)
        }
        // Rows keep the causal order.
        const position = new Map(tree.nodes.map((n, i) => [n.id, i]))
        for (let i = 1; i < rows.length; i++)
          expect(position.get(rows[i]!.id)!).toBeGreaterThan(position.get(rows[i - 1]!.id)!)
        const id = tree.nodes[target % tree.nodes.length]!.id
        expect(visibleRows(tree, revealing(tree, collapsed, id)).some((r) => r.id === id)).toBe(true)
      }),
      { numRuns: 200 }
    )
  })

  test("uses the server's causal order and concurrent groups when they match the spans", () => {
    const spans = [span("a", null, 0, 100), span("b", "a", 10, 50), span("c", "a", 20, 50)]
    const tree = buildSpanTree(spans, { causalOrder: ["a", "b", "c"], concurrentGroups: [["b", "c"]] })
    expect(tree.nodes.map((n) => n.id)).toEqual(["a", "b", "c"])
    expect(tree.byId.get("b")!.group).toBe(0)
    expect(tree.byId.get("c")!.group).toBe(0)
    expect(tree.byId.get("a")!.group).toBeUndefined()
    expect(tree.startMs).toBe(T0)
    expect(tree.endMs).toBe(T0 + 100)
  })

  test("a live span the server's order does not know yet is laid out here, siblings by start", () => {
    const spans = [span("a", null, 0, 100), span("late", "a", 5, 10), span("b", "a", 10, 50)]
    const tree = buildSpanTree(spans, { causalOrder: ["a", "b"], concurrentGroups: [] })
    expect(tree.nodes.map((n) => n.id)).toEqual(["a", "late", "b"])
  })

  test("marks errors, fork points and enforcement spans", () => {
    const tree = buildSpanTree([
      span("a", null, 0, 10, { error: "timeout" }),
      span("b", null, 1, 10, { span_type: "fork_point" }),
      span("c", null, 2, 10, { metadata: { enforcement: { run_id: "r" } } })
    ])
    expect(tree.nodes.map((n) => [n.isError, n.isForkPoint, n.isEnforcement])).toEqual([
      [true, false, false],
      [false, true, false],
      [false, false, true]
    ])
  })
})

describe("treeKey", () => {
  const tree = buildSpanTree([
    span("a", null, 0, 100),
    span("b", "a", 10, 50),
    span("c", "b", 20, 5),
    span("d", null, 200, 5)
  ])
  const rows = visibleRows(tree, new Set())

  test("up and down move among visible rows, clamped at the ends", () => {
    expect(treeKey(rows, new Set(), "a", "ArrowDown")).toEqual({ select: "b" })
    expect(treeKey(rows, new Set(), "a", "ArrowUp")).toEqual({ select: "a" })
    expect(treeKey(rows, new Set(), "d", "ArrowDown")).toEqual({ select: "d" })
    expect(treeKey(rows, new Set(), undefined, "ArrowDown")).toEqual({ select: "a" })
    expect(treeKey(rows, new Set(), "a", "End")).toEqual({ select: "d" })
  })

  test("right expands or enters, left collapses or leaves", () => {
    expect(treeKey(rows, new Set(), "a", "ArrowRight")).toEqual({ select: "b" })
    expect(treeKey(rows, new Set(["a"]), "a", "ArrowRight")).toEqual({ expand: "a" })
    expect(treeKey(rows, new Set(), "a", "ArrowLeft")).toEqual({ collapse: "a" })
    expect(treeKey(rows, new Set(), "c", "ArrowLeft")).toEqual({ select: "b" })
    expect(treeKey(rows, new Set(), "d", "ArrowLeft")).toEqual({})
    expect(treeKey(visibleRows(tree, new Set(["a"])), new Set(["a"]), "a", "ArrowDown")).toEqual({ select: "d" })
  })
})
