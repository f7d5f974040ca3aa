import { SPAN_TEXT_LIMITS } from "#src/domain/Span"
import { sha256Hex } from "#src/domain/hashing/Sha256"
import { cap, type Json, MAX_SESSION_ID, MAX_TAGS, type Node, type TraceFinalization, text } from "./FinalizeNodes.ts"

/** The trace row's derived fields (docs/otel-mapping.md, "Traces"), from its spans in start order. */

/** Longer session ids are hashed (docs/otel-mapping.md, "Traces"). */
const sessionId = (raw: string): string =>
  raw.length <= MAX_SESSION_ID ? raw : "sha256:" + sha256Hex(raw).slice(0, 56)

/** The first value `pick` finds on the root, then on the spans in start order. */
const firstOf = <A>(
  root: Node | undefined,
  ordered: ReadonlyArray<Node>,
  pick: (n: Node) => A | undefined
): A | undefined => {
  if (root !== undefined) {
    const v = pick(root)
    if (v !== undefined) return v
  }
  for (const n of ordered) {
    if (n === root) continue
    const v = pick(n)
    if (v !== undefined) return v
  }
  return undefined
}

/** "Traces": the trace row. A true root (no parent) wins over a local root (remote parent, flags bits 8+9). */
export const deriveTrace = (
  ordered: ReadonlyArray<Node>,
  byId: ReadonlyMap<string, Node>
): TraceFinalization["trace"] => {
  const root = traceRootOf(ordered, byId)
  const status = root === undefined ? "running" : root.otel.failed === true ? "failed" : "completed"
  // The instrumentation's own name for the run (TRACE_NAME_KEYS: a workflow name, an AI SDK functionId), on the root
  // or else on the first span that has one (OpenLLMetry and the AI SDK repeat it on the spans under a plain root, an
  // HTTP request for example); without one, the root span's name.
  const name =
    root === undefined
      ? null
      : cap(firstOf(root, ordered, (n) => text(n.hints.name)) ?? String(root.span.name), SPAN_TEXT_LIMITS.name)
  const byEnd = [...ordered].sort((x, y) => y.endMs - x.endMs)
  const { input, output } = traceInputOutput(root, ordered, byEnd)
  const session =
    firstOf(root, ordered, (n) => text(n.meta.session_id)) ??
    firstOf(root, ordered, (n) => text(n.hints.resource_session_id))

  const first = ordered[0]
  // An empty list has no start; the epoch keeps the field a valid instant (callers never finalize nothing).
  const startedAt = first === undefined ? new Date(0).toISOString() : first.span.started_at
  let endedAt: string | null = null
  if (root !== undefined)
    endedAt = root.span.ended_at ?? byEnd.find((n) => n.span.ended_at !== undefined)?.span.ended_at ?? null

  const { metadata, sandbox } = traceMetadata(root, ordered)
  const project = firstOf(root, ordered, (n) => text(n.hints.project_id))

  const trace: TraceFinalization["trace"] = {
    name,
    status,
    sessionId: session === undefined ? null : sessionId(session),
    startedAt,
    endedAt,
    metadata,
    environment: sandbox ? "sandbox" : "production"
  }
  if (project !== undefined) trace.projectId = project
  if (input !== undefined) trace.input = input
  if (output !== undefined) trace.output = output
  return trace
}

/** The span without a parent, else a local root whose parent did not arrive here (the top of what we have). */
const traceRootOf = (ordered: ReadonlyArray<Node>, byId: ReadonlyMap<string, Node>): Node | undefined =>
  ordered.find((n) => n.span.parent_id === null || n.otel.root === true) ??
  ordered.find((n) => n.otel.local_root === true && (n.span.parent_id === null || !byId.has(n.span.parent_id)))

/** Langfuse trace input: the root's, else the earliest span's; output: the root's, else the latest-ending span's. */
const traceInputOutput = (root: Node | undefined, ordered: ReadonlyArray<Node>, byEnd: ReadonlyArray<Node>) => {
  const llmCalls = ordered.filter((n) => n.span.span_type === "llm_call")
  let input = firstOf(root, ordered, (n) => n.hints.input)
  input ??= root?.span.input
  input ??= llmCalls.find((n) => n.span.input !== undefined)?.span.input
  let output = firstOf(root, byEnd, (n) => n.hints.output)
  output ??= root?.span.output
  output ??= [...llmCalls].sort((x, y) => y.endMs - x.endMs).find((n) => n.span.output !== undefined)?.span.output
  return { input, output }
}

/** The trace's `metadata` from its spans' hints, the root's first, and whether a sender marked it a sandbox. */
const traceMetadata = (root: Node | undefined, ordered: ReadonlyArray<Node>) => {
  const metadata: Json = {}
  const traceId = firstOf(root, ordered, (n) => text(n.otel.trace_id))
  if (traceId !== undefined) metadata.otel = { trace_id: traceId }
  const service = firstOf(root, ordered, (n) => text(n.otel.service_name))
  if (service !== undefined) metadata.service_name = service
  const user = firstOf(root, ordered, (n) => text(n.meta.user_id))
  if (user !== undefined) metadata.user_id = user
  const tags: Array<string> = []
  for (const n of root === undefined ? ordered : [root, ...ordered]) {
    if (!Array.isArray(n.hints.tags)) continue
    for (const t of n.hints.tags) if (typeof t === "string" && tags.length < MAX_TAGS && !tags.includes(t)) tags.push(t)
  }
  if (tags.length > 0) metadata.tags = tags
  // Sandbox only when a sender says so explicitly (langfuse.environment / deployment.environment.name); any other
  // environment name is kept, and filterable, as metadata.environment.
  const sandbox = ordered.some((n) => text(n.hints.environment)?.trim().toLowerCase() === "sandbox")
  const environmentName = firstOf(root, ordered, (n) => text(n.hints.environment))
  if (sandbox) metadata.environment = "sandbox"
  else if (environmentName !== undefined) metadata.environment = environmentName
  const release = firstOf(root, ordered, (n) => text(n.hints.release))
  if (release !== undefined) metadata.release = release
  const version = firstOf(root, ordered, (n) => text(n.hints.version))
  if (version !== undefined) metadata.version = version
  // Trace metadata from the vendor conventions: every span's, the root's winning on a shared key.
  let sent: Json | undefined
  for (const n of root === undefined ? ordered : [...ordered.filter((o) => o !== root), root]) {
    const m = n.hints.metadata
    if (typeof m === "object" && m !== null && !Array.isArray(m)) sent = { ...sent, ...(m as Json) }
  }
  if (sent !== undefined) metadata.metadata = sent
  return { metadata, sandbox }
}
