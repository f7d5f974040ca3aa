import { JsonView } from "./JsonView.tsx"

/** A chat message as LLM APIs and SDKs commonly write them. */
interface ChatMessage {
  readonly role: string
  readonly content?: unknown
  readonly tool_calls?: ReadonlyArray<unknown>
  readonly name?: string
  readonly tool_call_id?: string
}

const isMessage = (value: unknown): value is ChatMessage =>
  typeof value === "object" && value !== null && typeof (value as { role?: unknown }).role === "string"

/**
 * The chat messages in a span's input or output, when it has them: a list of messages, `{messages: […]}`,
 * or a single message (an output); undefined otherwise.
 */
export const chatMessages = (value: unknown): ReadonlyArray<ChatMessage> | undefined => {
  const list = Array.isArray(value)
    ? value
    : typeof value === "object" && value !== null && Array.isArray((value as { messages?: unknown }).messages)
      ? (value as { messages: Array<unknown> }).messages
      : isMessage(value)
        ? [value]
        : undefined
  if (list === undefined || list.length === 0 || !list.every(isMessage)) return undefined
  return list
}

/** Text parts of a content value (a string, or OpenAI/Anthropic-style parts with `text`). */
const textOf = (content: unknown): string | undefined => {
  if (typeof content === "string") return content
  if (
    Array.isArray(content) &&
    content.every(
      (part) => typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string"
    )
  ) {
    return content.map((part) => (part as { text: string }).text).join("\n")
  }
  return undefined
}

/** Messages shown as a conversation: each with its role, its text, and its tool calls as collapsible JSON. */
export const Conversation = (props: { readonly messages: ReadonlyArray<ChatMessage>; readonly label: string }) => (
  <ol className="conversation" aria-label={props.label}>
    {props.messages.map((message, i) => {
      const text = textOf(message.content)
      return (
        <li key={i} className={`message role-${message.role}`}>
          <div className="message-role">
            {message.role}
            {message.name !== undefined && <span className="muted"> · {message.name}</span>}
            {message.tool_call_id !== undefined && <span className="muted mono"> · {message.tool_call_id}</span>}
          </div>
          {text !== undefined ? (
            <div className="message-text">{text}</div>
          ) : (
            message.content !== undefined && message.content !== null && <JsonView value={message.content} open={1} />
          )}
          {message.tool_calls !== undefined && message.tool_calls.length > 0 && (
            <div className="message-tools">
              <div className="muted">tool calls</div>
              <JsonView value={message.tool_calls} open={3} />
            </div>
          )}
        </li>
      )
    })}
  </ol>
)
