import { diffArrays } from "diff"

/** The fields of a span the comparison reads; both the decoded and the wire form of a span fit. */
export interface ComparableSpan {
  readonly id: string
  readonly parent_id: string | null
  readonly span_type: string
  readonly name: string
  readonly model?: string | undefined
  readonly input?: unknown
  readonly output?: unknown
  readonly error?: string | undefined
  readonly input_tokens?: number | undefined
  readonly output_tokens?: number | undefined
  readonly cost?: number | undefined
  readonly duration_ms?: number | undefined
}

/**
 * One row of the side-by-side view.
 * - `same`: a span of each side at the same causal position with the same type and name, and equal
 *   input, output, error and model;
 * - `changed`: paired like `same`, but one of those differs;
 * - `removed`: a span only the left (original) trace has; `inserted`: one only the right trace has.
 */
export type AlignedRow<S extends ComparableSpan> =
  | {
      readonly kind: "same" | "changed"
      readonly left: S
      readonly right: S
      readonly leftDepth: number
      readonly rightDepth: number
    }
  | { readonly kind: "removed"; readonly left: S; readonly leftDepth: number }
  | { readonly kind: "inserted"; readonly right: S; readonly rightDepth: number }

export interface Alignment<S extends ComparableSpan> {
  readonly rows: ReadonlyArray<AlignedRow<S>>
  /**
   * True when the two sides were too different for the exact alignment within the time allowed: they are
   * then aligned greedily (each span still exactly once, pairs still of equal type and name, but not
   * necessarily as many pairs as possible), and the view says so.
   */
  readonly approximate: boolean
}

/** Spans in causal order (the server's `causalOrder`, else parents before children in listed order). */
export const causalSequence = <S extends ComparableSpan>(
  spans: ReadonlyArray<S>,
  causalOrder: ReadonlyArray<string> | undefined
): ReadonlyArray<S> => {
  const byId = new Map(spans.map((s) => [s.id, s] as const))
  const out: Array<S> = []
  const seen = new Set<string>()
  for (const id of causalOrder ?? []) {
    const span = byId.get(id)
    if (span !== undefined && !seen.has(id)) {
      seen.add(id)
      out.push(span)
    }
  }
  // Spans the order does not name (an older trace, or a partial order) follow in the order listed.
  for (const span of spans) {
    if (!seen.has(span.id)) {
      seen.add(span.id)
      out.push(span)
    }
  }
  return out
}

/** Depth of each span in its tree; a span whose parent is absent (or part of a cycle) counts as a root. */
export const depths = (spans: ReadonlyArray<ComparableSpan>): ReadonlyMap<string, number> => {
  const parentOf = new Map(spans.map((s) => [s.id, s.parent_id] as const))
  const depth = new Map<string, number>()
  for (const span of spans) {
    // Walk up until a known depth or a root, then fill the chain in; the visited set breaks cycles.
    const chain: Array<string> = []
    const onChain = new Set<string>()
    let current: string | null | undefined = span.id
    let base = -1
    while (current != null && parentOf.has(current) && !onChain.has(current)) {
      const known = depth.get(current)
      if (known !== undefined) {
        base = known
        break
      }
      chain.push(current)
      onChain.add(current)
      current = parentOf.get(current)
    }
    for (let i = chain.length - 1; i >= 0; i--) depth.set(chain[i]!, ++base)
  }
  return depth
}

const alignmentKey = (span: ComparableSpan) => `${span.span_type}\u0000${span.name}`

/** JSON text with object keys sorted, so two values equal as data compare equal as text. */
export const canonicalJson = (value: unknown): string => {
  if (value === undefined) return "undefined"
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const sorted: Record<string, unknown> = {}
      for (const k of Object.keys(v as Record<string, unknown>).sort()) sorted[k] = (v as Record<string, unknown>)[k]
      return sorted
    }
    return v
  })
}

/** Whether a paired span's content differs: input, output, error or model. */
export const spanContentChanged = (left: ComparableSpan, right: ComparableSpan): boolean =>
  canonicalJson(left.input) !== canonicalJson(right.input) ||
  canonicalJson(left.output) !== canonicalJson(right.output) ||
  (left.error ?? null) !== (right.error ?? null) ||
  (left.model ?? null) !== (right.model ?? null)

/** How long the exact alignment may run (on the page's thread) before the greedy one takes over. */
export const ALIGNMENT_TIMEOUT_MS = 400

/** How far ahead on the right the greedy alignment looks for a span's partner. */
const GREEDY_LOOKAHEAD = 64

/**
 * A linear-time alignment for sides too different for the exact one: each left span pairs with the nearest
 * right span of the same key within a short lookahead, skipped right spans are inserted, unmatched left spans
 * removed. Monotone, so the rows keep both causal orders.
 */
const greedyPairs = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<readonly [number, number]> => {
  const positions = new Map<string, Array<number>>()
  b.forEach((key, j) => {
    const list = positions.get(key)
    if (list) list.push(j)
    else positions.set(key, [j])
  })
  const cursor = new Map<string, number>()
  const pairs: Array<readonly [number, number]> = []
  let next = 0
  for (let i = 0; i < a.length; i++) {
    const list = positions.get(a[i]!)
    if (list === undefined) continue
    let k = cursor.get(a[i]!) ?? 0
    while (k < list.length && list[k]! < next) k++
    cursor.set(a[i]!, k)
    const j = list[k]
    if (j !== undefined && j - next <= GREEDY_LOOKAHEAD) {
      pairs.push([i, j])
      next = j + 1
      cursor.set(a[i]!, k + 1)
    }
  }
  return pairs
}

/**
 * Aligns two traces' spans by causal position and name: both sides are laid out in causal order and the
 * longest common subsequence of (span type, name) pairs them (Myers' algorithm, from the `diff` package);
 * what is left over is removed (left only) or inserted (right only). A removal is listed before the
 * insertion that takes its place, as a text diff would.
 */
export const alignSpans = <S extends ComparableSpan>(
  left: { readonly spans: ReadonlyArray<S>; readonly causalOrder?: ReadonlyArray<string> | undefined },
  right: { readonly spans: ReadonlyArray<S>; readonly causalOrder?: ReadonlyArray<string> | undefined },
  options: { readonly timeoutMs?: number } = {}
): Alignment<S> => {
  const a = causalSequence(left.spans, left.causalOrder)
  const b = causalSequence(right.spans, right.causalOrder)
  const depthA = depths(a)
  const depthB = depths(b)
  const rows: Array<AlignedRow<S>> = []
  const removed = (span: S) => rows.push({ kind: "removed", left: span, leftDepth: depthA.get(span.id) ?? 0 })
  const inserted = (span: S) => rows.push({ kind: "inserted", right: span, rightDepth: depthB.get(span.id) ?? 0 })

  const paired = (l: S, r: S) =>
    rows.push({
      kind: spanContentChanged(l, r) ? "changed" : "same",
      left: l,
      right: r,
      leftDepth: depthA.get(l.id) ?? 0,
      rightDepth: depthB.get(r.id) ?? 0
    })
  const keysA = a.map(alignmentKey)
  const keysB = b.map(alignmentKey)
  const timeout = options.timeoutMs ?? ALIGNMENT_TIMEOUT_MS
  // No time at all (tests use it) means the greedy alignment straight away.
  const changes = timeout <= 0 ? undefined : diffArrays(keysA, keysB, { timeout })
  let i = 0
  let j = 0
  if (changes === undefined) {
    for (const [pi, pj] of greedyPairs(keysA, keysB)) {
      while (i < pi) removed(a[i++]!)
      while (j < pj) inserted(b[j++]!)
      paired(a[i++]!, b[j++]!)
    }
    while (i < a.length) removed(a[i++]!)
    while (j < b.length) inserted(b[j++]!)
    return { rows, approximate: true }
  }
  for (const change of changes) {
    const count = change.count ?? change.value.length
    for (let k = 0; k < count; k++) {
      if (change.removed) removed(a[i++]!)
      else if (change.added) inserted(b[j++]!)
      else paired(a[i++]!, b[j++]!)
    }
  }
  return { rows, approximate: false }
}
