import { useMemo } from "react"
import { type AgentGraphInput, layOutAgentGraph, type PlacedNode } from "./agentGraphLayout.ts"

const pathOf = (points: ReadonlyArray<{ readonly x: number; readonly y: number }>) =>
  points.map((p, i) => `${i === 0 ? "M" : "L"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ")

/**
 * The session's agents as an SVG graph: boxes with the agent id, role and span count (errors in red), arrows for
 * hand-offs labelled with their call counts. Each agent is a button; `onSelect` gets its id (null for the root).
 */
export const AgentGraph = (props: {
  readonly graph: AgentGraphInput
  readonly selected: string | null | undefined
  readonly onSelect: (agentId: string | null) => void
}) => {
  const laid = useMemo(() => layOutAgentGraph(props.graph), [props.graph])
  if (laid.nodes.length === 0) return <p className="muted">No agents recorded in this session.</p>
  const activate = (node: PlacedNode) => props.onSelect(node.agentId)
  return (
    <svg
      className="agent-graph"
      role="group"
      aria-label="Agent graph"
      width={laid.width}
      height={laid.height}
      viewBox={`0 0 ${laid.width} ${laid.height}`}
    >
      <defs>
        <marker
          id="arrow"
          viewBox="0 0 10 10"
          refX="9"
          refY="5"
          markerWidth="7"
          markerHeight="7"
          orient="auto-start-reverse"
        >
          <path d="M0,0 L10,5 L0,10 z" className="edge-head" />
        </marker>
      </defs>
      {laid.edges.map((e) => (
        <g key={`${e.from}>${e.to}`} className="edge">
          <path d={pathOf(e.points)} markerEnd="url(#arrow)" fill="none" />
          <text x={e.labelX} y={e.labelY + 4} textAnchor="middle" className="edge-count">
            <title>{`${e.calls} hand-off${e.calls === 1 ? "" : "s"}`}</title>
            {`×${e.calls}`}
          </text>
        </g>
      ))}
      {laid.nodes.map((n) => (
        <g
          key={n.key}
          role="button"
          tabIndex={0}
          aria-label={`Agent ${n.agentId ?? "(root)"}: ${n.spanCount} spans${n.errors > 0 ? `, ${n.errors} errors` : ""}`}
          aria-pressed={props.selected === n.agentId}
          className={`node${n.errors > 0 ? " has-errors" : ""}${props.selected === n.agentId ? " selected" : ""}`}
          transform={`translate(${n.x},${n.y})`}
          onClick={() => activate(n)}
          onKeyDown={(e) => {
            if (e.key === "Enter" || e.key === " ") {
              e.preventDefault()
              activate(n)
            }
          }}
        >
          <title>{n.agentId ?? "(root)"}</title>
          <rect width={n.width} height={n.height} rx={4} />
          <text x={8} y={17} className="node-name">
            {n.label}
          </text>
          <text x={8} y={34} className="node-meta">
            {n.role ? `${n.role} · ` : ""}
            {n.spanCount} spans{n.errors > 0 ? ` · ${n.errors} err` : ""}
          </text>
        </g>
      ))}
    </svg>
  )
}
