import type { ComponentType } from "react"
import type { SpanWire, TraceDetailWire } from "../../api/traceWire.ts"
import { CompareAction } from "../compare/ComparePage.tsx"
import { ForkHere } from "../fork/ForkHere.tsx"

/**
 * Actions other pages add to the trace page (fork, compare…): each is a component rendered in the trace's header
 * (`TraceAction`) or in the selected span's inspector (`SpanAction`). Add yours to these lists. The trace and its
 * spans are the API's wire objects (the contract's encoded types: ISO strings for instants).
 */
export type TraceAction = ComponentType<{ readonly trace: TraceDetailWire }>
export type SpanAction = ComponentType<{ readonly trace: TraceDetailWire; readonly span: SpanWire }>

export const traceActions: Array<TraceAction> = [CompareAction]
export const spanActions: Array<SpanAction> = [ForkHere]
