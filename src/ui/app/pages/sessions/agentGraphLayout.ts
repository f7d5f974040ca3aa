import { Graph, layout } from "@dagrejs/dagre"

/** The graph as GET /api/v1/sessions/{id}/graph answers it (only the fields drawn). */
export interface AgentGraphInput {
  readonly nodes: ReadonlyArray<{
    readonly agent_id: string | null
    readonly agent_role: string | null
    readonly root: boolean
    readonly span_count: number
    readonly errors: number
  }>
  readonly edges: ReadonlyArray<{
    readonly parent_agent_id: string | null
    readonly agent_id: string
    readonly calls: number
  }>
}

export interface PlacedNode {
  /** The graph's key for the node: the agent id, or ROOT_KEY for the root node. */
  readonly key: string
  readonly agentId: string | null
  readonly label: string
  readonly role: string | null
  readonly spanCount: number
  readonly errors: number
  /** Top-left corner and size, in SVG user units. */
  readonly x: number
  readonly y: number
  readonly width: number
  readonly height: number
}

export interface PlacedEdge {
  readonly from: string
  readonly to: string
  readonly calls: number
  /** Polyline from the parent's box to the child's, as dagre routes it. */
  readonly points: ReadonlyArray<{ readonly x: number; readonly y: number }>
  /** Where the count is drawn. */
  readonly labelX: number
  readonly labelY: number
}

export interface AgentGraphLayout {
  readonly nodes: ReadonlyArray<PlacedNode>
  readonly edges: ReadonlyArray<PlacedEdge>
  readonly width: number
  readonly height: number
}

/** The root node's key: agent ids are free strings, so the root gets one no agent id can be (a NUL). */
export const ROOT_KEY = "\u0000root"

const NODE_HEIGHT = 44
const CHAR_WIDTH = 7
const MIN_NODE_WIDTH = 96
const MAX_LABEL_CHARS = 32

const nodeKey = (agentId: string | null) => agentId ?? ROOT_KEY

/** A label that fits a node: long agent ids are cut with an ellipsis (the full id is in the node's title). */
export const nodeLabel = (agentId: string | null): string => {
  if (agentId === null) return "(root)"
  return agentId.length > MAX_LABEL_CHARS ? `${agentId.slice(0, MAX_LABEL_CHARS - 1)}…` : agentId
}

/**
 * Lays the agent graph out top to bottom with dagre (layered, crossing-reduced, edges routed around
 * nodes). Hand-offs may form cycles (an agent handing back to its caller); dagre reverses a feedback set
 * to rank them and routes those edges anyway. Edges that name an agent the node list lacks get a node,
 * so the drawing never loses a hand-off.
 */
export const layOutAgentGraph = (graph: AgentGraphInput): AgentGraphLayout => {
  const g = new Graph({ multigraph: false })
  g.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 56, edgesep: 12, marginx: 12, marginy: 12 })
  g.setDefaultEdgeLabel(() => ({}))

  const info = new Map<string, { agentId: string | null; role: string | null; spanCount: number; errors: number }>()
  const addNode = (agentId: string | null, role: string | null, spanCount: number, errors: number) => {
    const key = nodeKey(agentId)
    if (info.has(key)) return
    info.set(key, { agentId, role, spanCount, errors })
    const label = nodeLabel(agentId)
    const width = Math.max(MIN_NODE_WIDTH, Math.max(label.length, (role ?? "").length + 2) * CHAR_WIDTH + 24)
    g.setNode(key, { width, height: NODE_HEIGHT })
  }
  for (const node of graph.nodes)
    addNode(node.root ? null : node.agent_id, node.agent_role, node.span_count, node.errors)
  for (const edge of graph.edges) {
    addNode(edge.parent_agent_id, null, 0, 0)
    addNode(edge.agent_id, null, 0, 0)
  }
  const calls = new Map<string, number>()
  for (const edge of graph.edges) {
    const from = nodeKey(edge.parent_agent_id)
    const to = nodeKey(edge.agent_id)
    const id = `${from}\u0001${to}`
    calls.set(id, (calls.get(id) ?? 0) + edge.calls)
    // Room for the count beside the edge.
    g.setEdge(from, to, { width: 24, height: 14, labelpos: "c" })
  }

  layout(g)

  const nodes: Array<PlacedNode> = []
  for (const key of g.nodes()) {
    const n = g.node(key)
    const data = info.get(key)!
    nodes.push({
      key,
      agentId: data.agentId,
      label: nodeLabel(data.agentId),
      role: data.role,
      spanCount: data.spanCount,
      errors: data.errors,
      x: n.x - n.width / 2,
      y: n.y - n.height / 2,
      width: n.width,
      height: n.height
    })
  }
  const edges: Array<PlacedEdge> = []
  for (const e of g.edges()) {
    const label = g.edge(e) as { points?: Array<{ x: number; y: number }>; x?: number; y?: number }
    const points = label.points ?? []
    const middle = points[Math.floor(points.length / 2)] ?? { x: 0, y: 0 }
    edges.push({
      from: e.v,
      to: e.w,
      calls: calls.get(`${e.v}\u0001${e.w}`) ?? 0,
      points,
      labelX: label.x ?? middle.x,
      labelY: label.y ?? middle.y
    })
  }
  const size = g.graph() as { width?: number; height?: number }
  return { nodes, edges, width: Math.ceil(size.width ?? 0), height: Math.ceil(size.height ?? 0) }
}
