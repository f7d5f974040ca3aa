import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { layOutAgentGraph, nodeLabel, ROOT_KEY } from "../../../src/ui/app/pages/sessions/agentGraphLayout.ts"

const node = (agent_id: string | null, span_count = 1) => ({
  agent_id,
  agent_role: null,
  root: agent_id === null,
  span_count,
  errors: 0
})

/** Graphs of up to 8 agents with any hand-offs (cycles and self hand-offs included), as the API could answer. */
const graphArb = fc
  .tuple(
    fc.integer({ min: 0, max: 8 }),
    fc.array(fc.tuple(fc.nat(8), fc.nat(8), fc.integer({ min: 1, max: 50 })), { maxLength: 20 })
  )
  .map(([n, pairs]) => {
    const ids = Array.from({ length: n }, (_, i) => `agent-${i}`)
    const at = (i: number) => (i >= n ? null : ids[i]!)
    const edges = new Map<string, { parent_agent_id: string | null; agent_id: string; calls: number }>()
    for (const [p, c, calls] of pairs) {
      const child = at(c)
      if (child === null) continue
      edges.set(`${at(p)}>${child}`, { parent_agent_id: at(p), agent_id: child, calls })
    }
    return { nodes: [node(null), ...ids.map((id) => node(id))], edges: [...edges.values()] }
  })

const overlaps = (a: { x: number; y: number; width: number; height: number }, b: typeof a) =>
  a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height

describe("layOutAgentGraph", () => {
  test("every agent is placed once, inside the drawing, without overlapping another; every hand-off is drawn with its count", () => {
    fc.assert(
      fc.property(graphArb, (graph) => {
        const laid = layOutAgentGraph(graph)
        expect(laid.nodes.map((n) => n.key).sort()).toEqual(graph.nodes.map((n) => n.agent_id ?? ROOT_KEY).sort())
        for (const n of laid.nodes) {
          expect(n.x).toBeGreaterThanOrEqual(0)
          expect(n.y).toBeGreaterThanOrEqual(0)
          expect(n.x + n.width).toBeLessThanOrEqual(laid.width + 0.5)
          expect(n.y + n.height).toBeLessThanOrEqual(laid.height + 0.5)
        }
        for (let i = 0; i < laid.nodes.length; i++) {
          for (let j = i + 1; j < laid.nodes.length; j++) expect(overlaps(laid.nodes[i]!, laid.nodes[j]!)).toBe(false)
        }
        const drawn = laid.edges.map((e) => `${e.from}>${e.to}:${e.calls}`).sort()
        const given = graph.edges.map((e) => `${e.parent_agent_id ?? ROOT_KEY}>${e.agent_id}:${e.calls}`).sort()
        expect(drawn).toEqual(given)
        for (const e of laid.edges) expect(e.from === e.to || e.points.length >= 2).toBe(true)
      }),
      { numRuns: 60 }
    )
  })

  test("a hand-off chain reads top to bottom", () => {
    const laid = layOutAgentGraph({
      nodes: [node(null), node("planner"), node("researcher")],
      edges: [
        { parent_agent_id: null, agent_id: "planner", calls: 1 },
        { parent_agent_id: "planner", agent_id: "researcher", calls: 2 }
      ]
    })
    const y = (key: string) => laid.nodes.find((n) => n.key === key)!.y
    expect(y(ROOT_KEY)).toBeLessThan(y("planner"))
    expect(y("planner")).toBeLessThan(y("researcher"))
  })

  test("an agent named only by an edge still gets a node; an agent id that reads like the root's label is not the root", () => {
    const laid = layOutAgentGraph({
      nodes: [node(null)],
      edges: [{ parent_agent_id: "(root)", agent_id: "x", calls: 3 }]
    })
    expect(laid.nodes.map((n) => n.key).sort()).toEqual([ROOT_KEY, "(root)", "x"].sort())
  })

  test("labels: the root is '(root)', long ids are cut with an ellipsis", () => {
    expect(nodeLabel(null)).toBe("(root)")
    expect(nodeLabel("a".repeat(40))).toBe(`${"a".repeat(31)}…`)
  })
})
