import { type ComponentType, lazy, Suspense } from "react"
import type { SpanWire, TraceDetailWire } from "../../api/traceWire.ts"

/**
 * Actions other pages add to the trace page (fork, compare…): each is a component rendered in the trace's header
 * (`TraceAction`) or in the selected span's inspector (`SpanAction`). Add yours to these lists. The trace and its
 * spans are the API's wire objects (the contract's encoded types: ISO strings for instants).
 */
export type TraceAction = ComponentType<{ readonly trace: TraceDetailWire }>
export type SpanAction = ComponentType<{ readonly trace: TraceDetailWire; readonly span: SpanWire }>

// Loaded with the trace page's first render, in a chunk of their own: the comparison and the fork editor bring a
// text-diff library the first page does not need.
const CompareLater = lazy(() => import("../compare/ComparePage.tsx").then((m) => ({ default: m.CompareAction })))
const ForkHereLater = lazy(() => import("../fork/ForkHere.tsx").then((m) => ({ default: m.ForkHere })))
const CompareAction: TraceAction = (props) => (
  <Suspense fallback={null}>
    <CompareLater {...props} />
  </Suspense>
)
const ForkHere: SpanAction = (props) => (
  <Suspense fallback={null}>
    <ForkHereLater {...props} />
  </Suspense>
)

export const traceActions: Array<TraceAction> = [CompareAction]
export const spanActions: Array<SpanAction> = [ForkHere]
