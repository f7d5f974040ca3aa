import { Either, Schema } from "effect"
import { forwardRef, type ReactNode, useMemo } from "react"
import { extraFields, Span } from "../../../../domain/Span.ts"
import type { SpanWire } from "../../api/traceWire.ts"
import { Conversation, chatMessages } from "../../components/Conversation.tsx"
import { JsonView } from "../../components/JsonView.tsx"
import { formatCost, formatCount, formatDuration, formatTime } from "../../format.ts"
import type { SpanNode } from "./spanTree.ts"

const decodeSpan = Schema.decodeUnknownEither(Span)

const Fact = (props: { readonly label: string; readonly children: ReactNode }) => (
  <>
    <dt>{props.label}</dt>
    <dd>{props.children}</dd>
  </>
)

/** An input or output: a conversation when it holds chat messages, else collapsible JSON (text as text). */
const Payload = (props: { readonly label: string; readonly value: unknown }) => {
  if (props.value === undefined) return null
  const messages = chatMessages(props.value)
  return (
    <section className="payload" aria-label={props.label}>
      <h3>{props.label}</h3>
      {messages !== undefined ? (
        <Conversation messages={messages} label={`${props.label} messages`} />
      ) : typeof props.value === "string" ? (
        <pre className="text-block">{props.value}</pre>
      ) : (
        <JsonView value={props.value} open={3} />
      )}
    </section>
  )
}

/**
 * Everything about the selected span: what it is (type, model, agent), what it cost (tokens, cost, latency, and
 * its subtree's totals), its input and output, its error, and its raw attributes.
 */
export const SpanInspector = forwardRef<
  HTMLElement,
  { readonly node: SpanNode<SpanWire> | undefined; readonly actions?: ReactNode }
>((props, ref) => {
  const node = props.node
  // The span is decoded by the contract's schema here, one at a time (the tree reads the wire objects).
  const decoded = useMemo(() => (node === undefined ? undefined : decodeSpan(node.span)), [node?.span])
  if (node === undefined || decoded === undefined) {
    return (
      <aside ref={ref} className="inspector empty" aria-label="Span inspector" tabIndex={-1}>
        <p className="muted">Select a span to inspect it.</p>
      </aside>
    )
  }
  if (Either.isLeft(decoded)) {
    return (
      <aside ref={ref} className="inspector" aria-label="Span inspector" tabIndex={-1}>
        <h2>{node.span.name}</h2>
        <p role="alert" className="error-text">
          This span does not match the API's schema: {decoded.left.message}
        </p>
        <JsonView value={node.span} open={2} />
      </aside>
    )
  }
  const span = decoded.right
  const extra = extraFields(span)
  const tokens = (span.input_tokens ?? 0) + (span.output_tokens ?? 0)
  return (
    <aside ref={ref} className="inspector" aria-label="Span inspector" tabIndex={-1}>
      <header className="inspector-head">
        <h2>{span.name}</h2>
        <div className="muted">
          <span className={`type type-${span.span_type}`}>{span.span_type}</span>
          {node.isError && <span className="mark mark-error">error</span>}
          {node.isForkPoint && <span className="mark mark-fork">fork point</span>}
          {node.isEnforcement && <span className="mark mark-enforce">enforcement</span>}
        </div>
        {props.actions !== undefined && <div className="inspector-actions">{props.actions}</div>}
      </header>
      <dl className="facts">
        {span.model !== undefined && <Fact label="Model">{span.model}</Fact>}
        <Fact label="Tokens">
          {tokens === 0
            ? "—"
            : `${formatCount(span.input_tokens ?? 0)} in · ${formatCount(span.output_tokens ?? 0)} out`}
        </Fact>
        <Fact label="Cost">{formatCost(span.cost)}</Fact>
        <Fact label="Latency">{formatDuration(node.endMs - node.startMs)}</Fact>
        <Fact label="Started">{formatTime(span.started_at)}</Fact>
        {span.agent_id !== undefined && (
          <Fact label="Agent">
            {span.agent_id}
            {span.agent_role !== undefined ? ` (${span.agent_role})` : ""}
          </Fact>
        )}
        {span.parent_agent_id !== undefined && <Fact label="Parent agent">{span.parent_agent_id}</Fact>}
        <Fact label="Causal position">
          #{node.causalIndex + 1}
          {node.group !== undefined ? ` · concurrent group ${node.group + 1}` : ""}
        </Fact>
        {node.children.length > 0 && (
          <Fact label="Subtree">
            {formatCount(node.rollup.spans)} spans · {formatCount(node.rollup.tokens)} tokens ·{" "}
            {formatCost(node.rollup.cost)}
            {node.rollup.errors > 0 ? ` · ${node.rollup.errors} errors` : ""}
          </Fact>
        )}
        <Fact label="Span id">
          <span className="mono">{span.id}</span>
        </Fact>
      </dl>
      {span.error !== undefined && (
        <section className="payload" aria-label="Error">
          <h3>Error</h3>
          <pre className="text-block error-text">{span.error}</pre>
        </section>
      )}
      <Payload label="Input" value={span.input} />
      <Payload label="Output" value={span.output} />
      {span.metadata !== undefined && (
        <section className="payload" aria-label="Metadata">
          <h3>Metadata</h3>
          <JsonView value={span.metadata} open={2} />
        </section>
      )}
      {extra !== undefined && (
        <section className="payload" aria-label="Attributes">
          <h3>Attributes</h3>
          <JsonView value={extra} open={2} />
        </section>
      )}
    </aside>
  )
})
