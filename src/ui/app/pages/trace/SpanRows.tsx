import { useVirtualizer } from "@tanstack/react-virtual"
import { type KeyboardEvent, memo, useEffect, useRef } from "react"
import { formatCost, formatCount, formatDuration } from "../../format.ts"
import { type SpanNode, type SpanTree, type TreeKey, treeKey } from "./spanTree.ts"

const ROW_HEIGHT = 24
const INDENT = 14
const TREE_KEYS = new Set(["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End", "PageUp", "PageDown"])

const TYPE_LABEL: Record<string, string> = {
  llm_call: "LLM",
  tool_call: "TOOL",
  tool_result: "RES",
  reasoning: "THINK",
  action: "ACT",
  error: "ERR",
  fork_point: "FORK"
}

interface RowProps {
  readonly node: SpanNode
  readonly index: number
  readonly setSize: number
  readonly top: number
  readonly selected: boolean
  readonly collapsed: boolean
  readonly extentStart: number
  readonly extentSpan: number
  readonly onSelect: (id: string) => void
  readonly onToggle: (id: string) => void
}

/** One span: its place in the tree (indent, toggle, type, name, marks, subtree roll-up) and its bar in time. */
const SpanRow = memo((props: RowProps) => {
  const { node } = props
  const extent = { start: props.extentStart, span: props.extentSpan }
  const left = ((node.startMs - extent.start) / extent.span) * 100
  const width = Math.max(((node.endMs - node.startMs) / extent.span) * 100, 0.15)
  const hasChildren = node.children.length > 0
  const classes = [
    "span-row",
    props.selected ? "selected" : "",
    node.isError ? "is-error" : "",
    node.group !== undefined ? "in-group" : ""
  ]
  return (
    <div
      role="treeitem"
      id={`span-${node.id}`}
      aria-label={node.span.name}
      aria-level={node.depth + 1}
      aria-setsize={props.setSize}
      aria-posinset={props.index + 1}
      aria-selected={props.selected}
      {...(hasChildren ? { "aria-expanded": !props.collapsed } : {})}
      className={classes.join(" ")}
      style={{ transform: `translateY(${props.top}px)` }}
      onClick={() => props.onSelect(node.id)}
    >
      <div className="tree-cell" style={{ paddingLeft: 4 + node.depth * INDENT }}>
        <span
          className={`toggle ${hasChildren ? "" : "leaf"}`}
          aria-hidden="true"
          onClick={(e) => {
            if (!hasChildren) return
            e.stopPropagation()
            props.onToggle(node.id)
          }}
        >
          {hasChildren ? (props.collapsed ? "▸" : "▾") : ""}
        </span>
        <span className={`type type-${node.span.span_type}`}>
          {TYPE_LABEL[node.span.span_type] ?? node.span.span_type}
        </span>
        <span className="span-name">{node.span.name}</span>
        {node.isError && (
          <span className="mark mark-error" title="error">
            error
          </span>
        )}
        {node.isForkPoint && (
          <span className="mark mark-fork" title="fork point">
            fork
          </span>
        )}
        {node.isEnforcement && (
          <span className="mark mark-enforce" title="enforcement decision">
            enforced
          </span>
        )}
        {node.group !== undefined && (
          <span className="mark mark-group" title={`concurrent group ${node.group + 1}: overlaps its siblings`}>
            ∥{node.group + 1}
          </span>
        )}
        <span className="rollup">
          {props.collapsed && hasChildren ? `${formatCount(node.rollup.spans - 1)} inside · ` : ""}
          {node.rollup.tokens > 0 ? `${formatCount(node.rollup.tokens)} tok` : ""}
          {node.rollup.cost > 0 ? ` · ${formatCost(node.rollup.cost)}` : ""}
          {node.rollup.errors > 0 && !node.isError ? ` · ${node.rollup.errors} err` : ""}
        </span>
      </div>
      <div className="bar-cell">
        <div className={`bar bar-${node.span.span_type}`} style={{ left: `${left}%`, width: `${width}%` }} />
        <span
          className="bar-label"
          // After the bar, or before it when the bar reaches the right edge.
          style={left + width > 85 ? { right: `${100 - left}%`, paddingRight: 4 } : { left: `${left + width}%` }}
        >
          {formatDuration(node.endMs - node.startMs)}
        </span>
      </div>
    </div>
  )
})

/** Time marks along the waterfall. */
const Axis = (props: { readonly span: number }) => (
  <div className="axis" aria-hidden="true">
    {[0, 0.25, 0.5, 0.75].map((f) => (
      <span key={f} style={{ left: `${f * 100}%` }}>
        {formatDuration(props.span * f)}
      </span>
    ))}
  </div>
)

/**
 * The span tree and the waterfall, side by side in one virtualised list (so they scroll and select together):
 * only the rows in view are in the DOM, whatever the trace's size. A WAI-ARIA tree: arrows move and fold, Enter
 * opens the selected span in the inspector.
 */
export const SpanRows = (props: {
  readonly tree: SpanTree
  readonly rows: ReadonlyArray<SpanNode>
  readonly collapsed: ReadonlySet<string>
  readonly selected: string | undefined
  readonly onSelect: (id: string) => void
  readonly onToggle: (id: string, open?: boolean) => void
  readonly onOpen: () => void
}) => {
  const { rows, tree, selected } = props
  const scroller = useRef<HTMLDivElement>(null)
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
    // Rows render in React's next batch rather than synchronously inside each scroll event: several scroll events
    // of one frame make one render.
    useFlushSync: false
  })
  const selectedIndex = selected === undefined ? -1 : rows.findIndex((row) => row.id === selected)
  useEffect(() => {
    if (selectedIndex >= 0) virtualizer.scrollToIndex(selectedIndex, { align: "auto" })
  }, [selectedIndex, virtualizer])

  const extent = { start: tree.startMs, span: Math.max(1, tree.endMs - tree.startMs) }
  const onKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    if (event.key === "Enter") {
      event.preventDefault()
      if (selected === undefined && rows.length > 0) props.onSelect(rows[0]!.id)
      props.onOpen()
      return
    }
    if (!TREE_KEYS.has(event.key)) return
    event.preventDefault()
    const page = Math.max(1, Math.floor((scroller.current?.clientHeight ?? 480) / ROW_HEIGHT) - 1)
    const move = treeKey(rows, props.collapsed, selected, event.key as TreeKey, page)
    if (move.select !== undefined) props.onSelect(move.select)
    if (move.collapse !== undefined) props.onToggle(move.collapse, false)
    if (move.expand !== undefined) props.onToggle(move.expand, true)
  }

  return (
    <div className="span-pane">
      <div className="span-head">
        <div className="tree-cell">Span</div>
        <div className="bar-cell">
          <Axis span={extent.span} />
        </div>
      </div>
      <div
        ref={scroller}
        className="span-scroll"
        role="tree"
        aria-label="Spans"
        tabIndex={0}
        onKeyDown={onKeyDown}
        {...(selectedIndex >= 0 ? { "aria-activedescendant": `span-${selected}` } : {})}
      >
        <div className="span-canvas" style={{ height: virtualizer.getTotalSize() }}>
          {virtualizer.getVirtualItems().map((item) => {
            const node = rows[item.index]!
            return (
              <SpanRow
                key={node.id}
                node={node}
                index={item.index}
                setSize={rows.length}
                top={item.start}
                selected={node.id === selected}
                collapsed={props.collapsed.has(node.id)}
                extentStart={extent.start}
                extentSpan={extent.span}
                onSelect={props.onSelect}
                onToggle={props.onToggle}
              />
            )
          })}
        </div>
      </div>
    </div>
  )
}
