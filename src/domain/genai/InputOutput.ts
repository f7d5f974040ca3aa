import type { SpanType } from "#src/domain/Span"
import { type Attrs, firstParsed, isBlank, parseJsonAlways, str } from "./Attributes.ts"
import type { Facts } from "./SpanKinds.ts"
import type { ConventionReading } from "./conventions/Conventions.ts"
import {
  fromLangChainSerialized,
  unwrapAiSdkToolOutput,
  unwrapToolMessage,
  withFinishReason,
  withPlainTextContent
} from "./conventions/FrameworkValues.ts"
import { requestParameters, withRequestParameters } from "./conventions/RequestParameters.ts"
import { aiSdkMessages, aiSdkOutput } from "./messages/AiSdkMessages.ts"
import { asOutput, yields } from "./messages/ChatMessages.ts"
import {
  EVENT_CONTENT,
  EVENT_DETAILS,
  EVENT_MESSAGES,
  eventsInput,
  eventsOutput,
  findEvent,
  pydanticEvents
} from "./messages/GenAiEvents.ts"
import { otelMessages, withSystem } from "./messages/GenAiMessages.ts"
import { completionAttribute, promptAttribute } from "./messages/LangChainMessages.ts"
import { legacyTexts, openInferenceMessages } from "./messages/OpenInferenceMessages.ts"
import { openLlmetryMessages } from "./messages/OpenLlmetryMessages.ts"

/** Input and output per span type: each convention tried in order, the first that yields wins. */

export interface IoState {
  usedEvents: number
}

const llmInput = (f: Facts, io: IoState): unknown => {
  const a = f.a
  let v = firstParsed(a, ["langfuse.observation.input"])
  if (yields(v)) return v
  const instructions = a["gen_ai.system_instructions"]
  if (!isBlank(a["gen_ai.input.messages"])) {
    v = withSystem(otelMessages(a["gen_ai.input.messages"], "user", f.memo), instructions)
    if (yields(v)) return v
  }
  if (f.scan.llmInputMessages && yields((v = openInferenceMessages(a, "llm.input_messages.", "user")))) return v
  if (f.scan.llmPrompts && yields((v = legacyTexts(a, "llm.prompts.", "prompt.text")))) return v
  if (f.scan.genAiPromptIndexed && yields((v = openLlmetryMessages(a, "gen_ai.prompt.", "user")))) return v
  if (!isBlank(a["ai.prompt.messages"]) && yields((v = aiSdkMessages(a["ai.prompt.messages"])))) return v
  const details = findEvent(f.events, "gen_ai.client.inference.operation.details")
  if (details !== undefined && !isBlank(details.attributes["gen_ai.input.messages"])) {
    v = withSystem(
      otelMessages(details.attributes["gen_ai.input.messages"], "user"),
      details.attributes["gen_ai.system_instructions"]
    )
    if (yields(v)) {
      io.usedEvents |= EVENT_DETAILS
      return v
    }
  }
  if (f.events.length > 0 && yields((v = eventsInput(f.events)))) {
    io.usedEvents |= EVENT_MESSAGES
    return v
  }
  const contentPrompt = findEvent(f.events, "gen_ai.content.prompt")
  if (contentPrompt !== undefined && yields((v = promptAttribute(contentPrompt.attributes["gen_ai.prompt"])))) {
    io.usedEvents |= EVENT_CONTENT
    return v
  }
  if (!isBlank(a["gen_ai.prompt"]) && yields((v = promptAttribute(a["gen_ai.prompt"])))) return v
  const legacy = isBlank(a["events"]) ? undefined : pydanticEvents(a["events"])
  if (legacy !== undefined && yields((v = eventsInput(legacy)))) return v
  if (yields((v = ioValue(a, "input.value", "input.mime_type")))) return v
  // System instructions alone still say what the model was told.
  return isBlank(instructions) ? undefined : withSystem(undefined, instructions)
}

const llmOutput = (f: Facts, io: IoState): unknown => {
  const a = f.a
  let v = firstParsed(a, ["langfuse.observation.output"])
  if (yields(v)) return v
  if (
    !isBlank(a["gen_ai.output.messages"]) &&
    yields((v = asOutput(otelMessages(a["gen_ai.output.messages"], "assistant"))))
  )
    return v
  if (f.scan.llmOutputMessages && yields((v = asOutput(openInferenceMessages(a, "llm.output_messages.", "assistant")))))
    return v
  if (f.scan.llmChoices && yields((v = legacyTexts(a, "llm.choices.", "completion.text")))) return v
  if (
    f.scan.genAiCompletionIndexed &&
    yields((v = asOutput(openLlmetryMessages(a, "gen_ai.completion.", "assistant"))))
  )
    return v
  if (yields((v = aiSdkOutput(a)))) return v
  const details = findEvent(f.events, "gen_ai.client.inference.operation.details")
  if (details !== undefined && !isBlank(details.attributes["gen_ai.output.messages"])) {
    v = asOutput(otelMessages(details.attributes["gen_ai.output.messages"], "assistant"))
    if (yields(v)) {
      io.usedEvents |= EVENT_DETAILS
      return v
    }
  }
  if (f.events.length > 0 && yields((v = eventsOutput(f.events)))) {
    io.usedEvents |= EVENT_MESSAGES
    return v
  }
  const contentCompletion = findEvent(f.events, "gen_ai.content.completion")
  if (
    contentCompletion !== undefined &&
    yields((v = completionAttribute(contentCompletion.attributes["gen_ai.completion"])))
  ) {
    io.usedEvents |= EVENT_CONTENT
    return v
  }
  if (!isBlank(a["gen_ai.completion"]) && yields((v = completionAttribute(a["gen_ai.completion"])))) return v
  const legacy = isBlank(a["events"]) ? undefined : pydanticEvents(a["events"])
  if (legacy !== undefined && yields((v = eventsOutput(legacy)))) return v
  return ioValue(a, "output.value", "output.mime_type")
}

/** `input.value` / `output.value`: parsed only when the mime type says JSON. */
const ioValue = (a: Attrs, key: string, mimeKey: string): unknown => {
  const v = a[key]
  if (isBlank(v)) return undefined
  const mime = str(a, mimeKey)
  // LangGraph / LangChain chains (OpenInference) put their serialized messages here.
  return mime !== undefined && mime.toLowerCase().startsWith("application/json")
    ? fromLangChainSerialized(parseJsonAlways(v))
    : v
}

const toolInput = (a: Attrs): unknown =>
  firstParsed(a, ["langfuse.observation.input", "gen_ai.tool.call.arguments", "ai.toolCall.args", "tool_arguments"]) ??
  ioValue(a, "input.value", "input.mime_type") ??
  (isBlank(a["traceloop.entity.input"]) ? undefined : parseJsonAlways(a["traceloop.entity.input"])) ??
  firstParsed(a, ["gen_ai.prompt"])

const toolOutput = (a: Attrs): unknown =>
  firstParsed(a, ["langfuse.observation.output", "gen_ai.tool.call.result"]) ??
  unwrapAiSdkToolOutput(firstParsed(a, ["ai.toolCall.result"])) ??
  firstParsed(a, ["tool_response"]) ??
  unwrapToolMessage(ioValue(a, "output.value", "output.mime_type")) ??
  (isBlank(a["traceloop.entity.output"]) ? undefined : parseJsonAlways(a["traceloop.entity.output"])) ??
  firstParsed(a, ["gen_ai.completion"])

const actionInput = (a: Attrs): unknown => {
  let v = firstParsed(a, ["langfuse.observation.input"]) ?? ioValue(a, "input.value", "input.mime_type")
  if (v !== undefined) return v
  if (!isBlank(a["traceloop.entity.input"])) return parseJsonAlways(a["traceloop.entity.input"])
  if (
    !isBlank(a["gen_ai.input.messages"]) &&
    yields((v = withSystem(otelMessages(a["gen_ai.input.messages"], "user"), a["gen_ai.system_instructions"])))
  )
    return v
  if (!isBlank(a["pydantic_ai.all_messages"]) && yields((v = otelMessages(a["pydantic_ai.all_messages"], "user"))))
    return v
  return firstParsed(a, ["ai.prompt", "gen_ai.prompt"])
}

const actionOutput = (a: Attrs): unknown => {
  let v = firstParsed(a, ["langfuse.observation.output"]) ?? ioValue(a, "output.value", "output.mime_type")
  if (v !== undefined) return v
  if (!isBlank(a["traceloop.entity.output"])) return parseJsonAlways(a["traceloop.entity.output"])
  if (
    !isBlank(a["gen_ai.output.messages"]) &&
    yields((v = asOutput(otelMessages(a["gen_ai.output.messages"], "assistant"))))
  )
    return v
  return (
    firstParsed(a, ["final_result"]) ??
    str(a, "ai.response.text") ??
    firstParsed(a, ["ai.response.object", "gen_ai.completion"])
  )
}

/** Input and output by span type; what a vendor convention carries fills what the readers found nothing for. */
export const inputOutputOf = (f: Facts, type: SpanType, conv: ConventionReading, io: IoState) => {
  let input: unknown
  let output: unknown
  switch (type) {
    case "llm_call":
      // Tools and sampling parameters travel with the messages, so a replay can send the same request.
      input = withRequestParameters(llmInput(f, io), requestParameters(f.a, f.memo))
      output = withFinishReason(withPlainTextContent(llmOutput(f, io)), f.a["llm.finish_reason"])
      break
    case "tool_call":
    case "tool_result":
      input = toolInput(f.a)
      output = toolOutput(f.a)
      break
    default:
      input = actionInput(f.a)
      output = actionOutput(f.a)
  }
  return { input: input ?? conv.input, output: output ?? conv.output }
}
