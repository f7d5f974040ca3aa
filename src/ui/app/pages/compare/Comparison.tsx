import { useVirtualizer } from "@tanstack/react-virtual"
import { useMemo, useRef, useState } from "react"
import type { SpanWire, TraceDetailWire } from "../../api/traceWire.ts"
import { formatCost, formatCount, formatDuration } from "../../format.ts"
import { Link } from "../../shell/router.tsx"
import { type AlignedRow, alignSpans } from "./alignSpans.ts"
import { DeltaBar } from "./DeltaBar.tsx"
import { traceDeltas } from "./deltas.ts"
import { DiffText } from "./DiffText.tsx"
import "./compare.css"

type Span = SpanWire
type Row = AlignedRow<Span>

const ROW_HEIGHT = 26

const KIND_LABEL: Record<Row["kind"], string> = {
  same: "same",
  changed: "changed",
  removed: "removed",
  inserted: "inserted"
}

const SpanCell = (props: { readonly span: Span | undefined; readonly depth: number }) => {
  if (props.span === undefined) return <div className="cmp-cell empty" />
  const s = props.span
  const tokens = (s.input_tokens ?? 0) + (s.output_tokens ?? 0)
  return (
    <div className="cmp-cell" title={s.name}>
      <span className="cmp-name" style={{ paddingLeft: Math.min(props.depth, 24) * 12 }}>
        <span className={`type-dot t-${s.span_type}`} aria-hidden="true" />
        {s.name}
        {s.error !== undefined && <span className="badge error">error</span>}
      </span>
      <span className="cmp-num mono">{tokens > 0 ? formatCount(tokens) : ""}</span>
      <span className="cmp-num mono">{s.duration_ms !== undefined ? formatDuration(s.duration_ms) : ""}</span>
    </div>
  )
}

/** A row's accessible name: what happened to which span. */
const rowName = (row: Row) => {
  const name = row.kind === "inserted" ? row.right.name : row.left.name
  return `${KIND_LABEL[row.kind]}: ${name}`
}

/** The selected pair (or lone span), its input, output and error as text diffs. */
const RowDetail = (props: { readonly row: Row }) => {
  const row = props.row
  const left = row.kind === "inserted" ? undefined : row.left
  const right = row.kind === "removed" ? undefined : row.right
  return (
    <section className="cmp-detail" aria-label="Selected span comparison">
      <h2>
        {(left ?? right)!.name} <span className={`badge ${row.kind}`}>{KIND_LABEL[row.kind]}</span>
      </h2>
      <dl className="cmp-facts">
        <dt>Model</dt>
        <dd>
          {left?.model ?? "—"} → {right?.model ?? "—"}
        </dd>
        <dt>Tokens</dt>
        <dd className="mono">
          {formatCount((left?.input_tokens ?? 0) + (left?.output_tokens ?? 0))} →{" "}
          {formatCount((right?.input_tokens ?? 0) + (right?.output_tokens ?? 0))}
        </dd>
        <dt>Cost</dt>
        <dd className="mono">
          {formatCost(left?.cost)} → {formatCost(right?.cost)}
        </dd>
        <dt>Latency</dt>
        <dd className="mono">
          {formatDuration(left?.duration_ms)} → {formatDuration(right?.duration_ms)}
        </dd>
      </dl>
      <DiffText label="Input" before={left?.input} after={right?.input} />
      <DiffText label="Output" before={left?.output} after={right?.output} />
      {(left?.error !== undefined || right?.error !== undefined) && (
        <DiffText label="Error" before={left?.error} after={right?.error} />
      )}
    </section>
  )
}

/**
 * Two traces side by side: the deltas on top, then the spans aligned by causal position and name (a virtualised
 * list, so a 10,000-span pair stays usable) and the selected row's input and output as text diffs.
 */
export const Comparison = (props: { readonly left: TraceDetailWire; readonly right: TraceDetailWire }) => {
  const { left, right } = props
  const alignment = useMemo(() => alignSpans(left, right), [left, right])
  const deltas = useMemo(() => traceDeltas(left, right), [left, right])
  const firstDifference = alignment.rows.findIndex((r) => r.kind !== "same")
  const [selected, setSelected] = useState(firstDifference < 0 ? 0 : firstDifference)
  const [onlyDifferences, setOnlyDifferences] = useState(false)
  const rows = useMemo(
    () => (onlyDifferences ? alignment.rows.filter((r) => r.kind !== "same") : alignment.rows),
    [alignment, onlyDifferences]
  )
  const counts = useMemo(() => {
    const c = { same: 0, changed: 0, removed: 0, inserted: 0 }
    for (const r of alignment.rows) c[r.kind]++
    return c
  }, [alignment])
  const scroller = useRef<HTMLDivElement>(null)
  const virtual = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 20
  })
  const current = rows[Math.min(selected, rows.length - 1)]

  const move = (to: number) => {
    const next = Math.max(0, Math.min(rows.length - 1, to))
    setSelected(next)
    virtual.scrollToIndex(next, { align: "auto" })
  }

  return (
    <div className="comparison">
      <DeltaBar deltas={deltas} />
      <DiffText label="Final output" before={left.output} after={right.output} />
      <div className="cmp-toolbar">
        <span className="muted">
          {counts.same} same · {counts.changed} changed · {counts.removed} removed · {counts.inserted} inserted
        </span>
        <label>
          <input
            type="checkbox"
            checked={onlyDifferences}
            onChange={(e) => {
              setOnlyDifferences(e.target.checked)
              setSelected(0)
            }}
          />{" "}
          Only differences
        </label>
        {alignment.approximate && (
          <span role="status" className="warn-text">
            These traces are too different to align exactly in time: spans were paired greedily, some pairs may be
            missed.
          </span>
        )}
      </div>
      <div className="cmp-split">
        <div className="cmp-list">
          <div className="cmp-head">
            <div className="cmp-cell">
              <Link href={`/ui/traces/${left.id}`}>{left.name ?? left.id}</Link> <span className="muted">original</span>
            </div>
            <div className="cmp-cell">
              <Link href={`/ui/traces/${right.id}`}>{right.name ?? right.id}</Link>{" "}
              <span className="muted">other run</span>
            </div>
          </div>
          <div
            ref={scroller}
            className="cmp-scroll"
            role="listbox"
            aria-label="Aligned spans"
            tabIndex={0}
            aria-activedescendant={current === undefined ? undefined : `cmp-row-${selected}`}
            onKeyDown={(e) => {
              if (e.key === "ArrowDown") {
                e.preventDefault()
                move(selected + 1)
              }
              if (e.key === "ArrowUp") {
                e.preventDefault()
                move(selected - 1)
              }
            }}
          >
            <div style={{ height: virtual.getTotalSize(), position: "relative" }}>
              {virtual.getVirtualItems().map((item) => {
                const row = rows[item.index]!
                return (
                  <div
                    key={item.key}
                    id={`cmp-row-${item.index}`}
                    role="option"
                    aria-selected={item.index === selected}
                    aria-label={rowName(row)}
                    className={`cmp-row k-${row.kind}`}
                    style={{ transform: `translateY(${item.start}px)`, height: ROW_HEIGHT }}
                    onClick={() => setSelected(item.index)}
                  >
                    <SpanCell
                      span={row.kind === "inserted" ? undefined : row.left}
                      depth={row.kind === "inserted" ? 0 : row.leftDepth}
                    />
                    <SpanCell
                      span={row.kind === "removed" ? undefined : row.right}
                      depth={row.kind === "removed" ? 0 : row.rightDepth}
                    />
                  </div>
                )
              })}
            </div>
          </div>
        </div>
        {current !== undefined && <RowDetail row={current} />}
      </div>
    </div>
  )
}
