import { SPAN_TEXT_LIMITS } from "#src/domain/Span"
import { asText, firstText } from "./Attributes.ts"
import { type Facts, isAgentSpan } from "./SpanKinds.ts"
import { type Json, metaText, put } from "./TextCleaning.ts"
import { frameworkAgentId } from "./conventions/AgentIdentity.ts"

/** A span's own agent identity, kept apart from the inherited values finalize writes into the columns. */
export interface OwnAgent {
  readonly agentSpan: boolean
  readonly ownId: string | undefined
  readonly ownRole: string | undefined
}

export const ownAgentOf = (f: Facts, spanName: string): OwnAgent => {
  const a = f.a
  const agentSpan = isAgentSpan(f)
  const traceloopAgent = f.traceloopKind === "agent" ? asText(a["traceloop.entity.name"]) : undefined
  const ownId = metaText(
    firstText(a, ["gen_ai.agent.id", "gen_ai.agent.name", "agent.name"]) ??
      traceloopAgent ??
      asText(a["agent_name"]) ??
      frameworkAgentId(a, agentSpan, spanName),
    SPAN_TEXT_LIMITS.agent_id
  )
  const ownRole = metaText(
    firstText(a, ["gen_ai.agent.name", "agent.name"]) ?? traceloopAgent ?? asText(a["agent_name"]),
    SPAN_TEXT_LIMITS.agent_role
  )
  return { agentSpan, ownId, ownRole }
}

/** `metadata.agent`: `{ is_agent_span, own_id?, own_role? }`. */
export const agentMetadata = (agent: OwnAgent): Json => {
  const own: Json = { is_agent_span: agent.agentSpan }
  put(own, "own_id", agent.ownId)
  if (agent.ownId !== undefined) put(own, "own_role", agent.ownRole)
  return own
}
