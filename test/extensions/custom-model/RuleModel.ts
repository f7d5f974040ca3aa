import { Effect } from "effect"
import { type ChatRequest, LlmUnavailable, modelClient } from "tapedeck"

const textOf = (request: ChatRequest) =>
  request.messages.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n")

/** Every request it received, in order (for the tests). */
export const received: Array<ChatRequest> = []

/**
 * The team's own model, in process (no HTTP): a rule instead of a network call. As a judge (the rubric prompt names
 * a criterion) it scores 1 when the trace says "Booked", else 0; otherwise it answers "plan for: <the last user
 * message>". A trace named "quota" fails with the reason it chose; one named "bug" fails with a defect.
 */
export const RuleModelLive = modelClient({
  name: "rule-model",
  defaultModel: "rule-1",
  chat: (request) =>
    Effect.gen(function* () {
      received.push(request)
      const text = textOf(request)
      if (/^Trace: quota — /m.test(text))
        return yield* new LlmUnavailable({ reason: "http_error", status: 429, message: "monthly quota used up" })
      if (/^Trace: bug — /m.test(text)) throw new Error("rule table is corrupt")
      const content = /^Criterion: /m.test(text)
        ? JSON.stringify({ score: text.includes("Booked") ? 1 : 0, reason: "rule: booked or not" })
        : `plan for: ${[...request.messages].reverse().find((m) => m.role === "user")?.content ?? ""}`
      return {
        model: request.model,
        message: { role: "assistant" as const, content },
        usage: { inputTokens: 10, outputTokens: 5 },
        finishReason: "stop"
      }
    })
})
