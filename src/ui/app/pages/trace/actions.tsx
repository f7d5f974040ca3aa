import type { ComponentType } from "react"
import type { Span } from "../../../../domain/Span.ts"
import type { TraceDetail } from "../../../../domain/Trace.ts"
import { CompareAction } from "../compare/ComparePage.tsx"
import { ForkHere } from "../fork/ForkHere.tsx"

/**
 * Actions other pages add to the trace page (fork, compare…): each is a component rendered in the trace's header
 * (`TraceAction`) or in the selected span's inspector (`SpanAction`). Add yours to these lists.
 */
export type TraceAction = ComponentType<{ readonly trace: TraceDetail }>
export type SpanAction = ComponentType<{ readonly trace: TraceDetail; readonly span: Span }>

export const traceActions: Array<TraceAction> = [CompareAction]
export const spanActions: Array<SpanAction> = [ForkHere]
