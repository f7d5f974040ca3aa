import { Context, type Effect } from "effect"
import { REPLAYABLE } from "#src/domain/ReplayPlan"
import { LlmUnavailable } from "#src/domain/Errors"

/** One message of an OpenAI-style conversation; field names are the wire names. */
export interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly content: string | null
  readonly tool_calls?: unknown
  readonly tool_call_id?: string
  readonly name?: string
}

/** A Chat Completions request; optional fields are sent only when set, and an empty `model` means `defaultModel`. */
export interface ChatRequest {
  readonly model: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools?: unknown
  readonly tool_choice?: unknown
  readonly parallel_tool_calls?: unknown
  readonly temperature?: number
  readonly max_tokens?: number
  readonly top_p?: unknown
  readonly frequency_penalty?: unknown
  readonly presence_penalty?: unknown
  readonly stop?: unknown
  readonly seed?: unknown
  readonly n?: unknown
  readonly response_format?: unknown
}

/** The optional request fields, in the order they are written on the wire. */
export const CHAT_REQUEST_OPTIONS = REPLAYABLE satisfies ReadonlyArray<keyof ChatRequest>

/** The first choice of a completion with its token usage (0 when the provider reports none). */
export interface ChatResponse {
  readonly model: string
  readonly message: { readonly role: "assistant"; readonly content: string | null; readonly tool_calls?: unknown }
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
  readonly finishReason: string | null
}

/** Port to a chat-completion model provider (fork replay, LLM-judged evaluations). */
export class LlmClient extends Context.Tag("tapedeck/LlmClient")<LlmClient, {
  /** False when no provider is configured: every `chat` then fails `not_configured`. */
  readonly configured: boolean
  /** The model to use when the caller has no better choice (`TAPEDECK_LLM_MODEL`). */
  readonly defaultModel: string | undefined
  /** The provider's base URL, for callers that remember per provider what it accepts; absent when not configured. */
  readonly baseUrl?: string
  readonly chat: (request: ChatRequest) => Effect.Effect<ChatResponse, LlmUnavailable>
}>() {}
