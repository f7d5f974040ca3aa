/** The attribute keys each span field is read from, in order of preference, and the keys a field consumes. */

export const MODEL_KEYS = [
  "langfuse.observation.model.name",
  "gen_ai.response.model",
  "gen_ai.request.model",
  "llm.response.model_name",
  "llm.model_name",
  "llm.request.model_name",
  "ai.response.model",
  "ai.model.id",
  "embedding.model_name",
  "langsmith.metadata.ls_model_name"
]
// `llm.system` (the AI product) before `llm.provider` (the host): fixture 5 expects `openai`, not `azure`.
export const PROVIDER_KEYS = [
  "gen_ai.provider.name",
  "gen_ai.system",
  "llm.system",
  "llm.provider",
  "ai.model.provider",
  "langsmith.metadata.ls_provider"
]
export const INPUT_TOKEN_KEYS = [
  "gen_ai.usage.input_tokens",
  "gen_ai.usage.prompt_tokens",
  "llm.token_count.prompt",
  "ai.usage.inputTokens",
  "ai.usage.promptTokens",
  "ai.usage.tokens"
]
export const OUTPUT_TOKEN_KEYS = [
  "gen_ai.usage.output_tokens",
  "gen_ai.usage.completion_tokens",
  "llm.token_count.completion",
  "ai.usage.outputTokens",
  "ai.usage.completionTokens"
]
export const CACHE_READ_KEYS = [
  "gen_ai.usage.cache_read.input_tokens",
  "gen_ai.usage.cache_read_input_tokens",
  "llm.token_count.prompt_details.cache_read",
  "ai.usage.cachedInputTokens"
]
export const CACHE_WRITE_KEYS = [
  "gen_ai.usage.cache_creation.input_tokens",
  "gen_ai.usage.cache_write.input_tokens",
  "gen_ai.usage.cache_creation_input_tokens",
  "llm.token_count.prompt_details.cache_write"
]
export const REASONING_KEYS = [
  "gen_ai.usage.reasoning.output_tokens",
  "llm.token_count.completion_details.reasoning",
  "ai.usage.reasoningTokens",
  "gen_ai.usage.reasoning_tokens"
]
export const TOTAL_KEYS = [
  "gen_ai.usage.total_tokens",
  "llm.token_count.total",
  "llm.usage.total_tokens",
  "ai.usage.totalTokens"
]
export const COST_KEYS = ["gen_ai.usage.cost", "llm.cost.total", "operation.cost"]
export const TOOL_NAME_KEYS = ["gen_ai.tool.name", "ai.toolCall.name", "tool.name"]
export const TOOL_CALL_ID_KEYS = ["gen_ai.tool.call.id", "ai.toolCall.id", "tool.id"]
export const TOOL_DESCRIPTION_KEYS = ["gen_ai.tool.description", "tool.description"]
/**
 * Session keys, in order (docs/otel-mapping.md, "Traces"); never `langsmith.trace.session_id` (the LangSmith
 * project).
 */
export const SESSION_KEYS = [
  "langfuse.session.id",
  "session.id",
  "gen_ai.conversation.id",
  "traceloop.association.properties.session_id",
  "langsmith.metadata.session_id",
  "langsmith.metadata.thread_id",
  "langsmith.metadata.conversation_id",
  "ai.telemetry.metadata.sessionId"
]
export const USER_KEYS = [
  "user.id",
  "langfuse.user.id",
  "traceloop.association.properties.user_id",
  "ai.telemetry.metadata.userId"
]
/**
 * The names an instrumentation gives the run itself, in order: Langfuse's explicit trace name, OpenLLMetry's and
 * the GenAI conventions' workflow name, then the Vercel AI SDK's `functionId` (its root span is `ai.generateText`).
 */
export const TRACE_NAME_KEYS = [
  "langfuse.trace.name",
  "traceloop.workflow.name",
  "gen_ai.workflow.name",
  "ai.telemetry.functionId"
]
export const TAG_KEYS = ["langfuse.trace.tags", "tag.tags", "langsmith.span.tags"]
export const ENVIRONMENT_KEYS = ["langfuse.environment", "deployment.environment.name", "deployment.environment"]

/**
 * Keys whose value is represented in a span field or in the structured metadata, so they are not repeated in
 * `metadata.attributes`. Content keys count even when another source won: they are alternative encodings of
 * the same messages, and repeating them would double the stored size.
 */
export const CONSUMED: ReadonlySet<string> = new Set([
  "tapedeck.span.type",
  "langfuse.observation.type",
  "openinference.span.kind",
  "langsmith.span.kind",
  "gen_ai.operation.name",
  "traceloop.span.kind",
  "llm.request.type",
  "ai.operationId",
  ...MODEL_KEYS,
  ...PROVIDER_KEYS.filter((k) => k !== "llm.provider"),
  ...INPUT_TOKEN_KEYS,
  ...OUTPUT_TOKEN_KEYS,
  ...CACHE_READ_KEYS,
  ...CACHE_WRITE_KEYS,
  ...REASONING_KEYS,
  ...TOTAL_KEYS,
  ...COST_KEYS,
  "gen_ai.aggregated_usage.input_tokens",
  "gen_ai.aggregated_usage.output_tokens",
  "gen_ai.aggregated_usage.cost",
  "gen_ai.input.messages",
  "gen_ai.output.messages",
  "gen_ai.system_instructions",
  "ai.prompt.messages",
  "ai.prompt",
  "gen_ai.prompt",
  "gen_ai.completion",
  "input.value",
  "input.mime_type",
  "output.value",
  "output.mime_type",
  "langfuse.observation.input",
  "langfuse.observation.output",
  "gen_ai.tool.call.arguments",
  "gen_ai.tool.call.result",
  "ai.toolCall.args",
  "ai.toolCall.result",
  "tool_arguments",
  "tool_response",
  "traceloop.entity.input",
  "traceloop.entity.output",
  "pydantic_ai.all_messages",
  "final_result",
  "ai.response.text",
  "ai.response.object",
  "ai.response.toolCalls",
  "ai.response.reasoning",
  "ai.response.reasoningText",
  "ai.response.finishReason",
  "ai.result.text",
  "ai.result.object",
  "ai.result.toolCalls",
  "ai.result.finishReason",
  "events",
  "gen_ai.response.id",
  "gen_ai.response.finish_reasons",
  "gen_ai.conversation.id",
  ...TOOL_NAME_KEYS,
  ...TOOL_CALL_ID_KEYS,
  ...TOOL_DESCRIPTION_KEYS,
  "gen_ai.tool.type",
  "gen_ai.agent.id",
  "gen_ai.agent.name",
  "gen_ai.agent.description",
  "gen_ai.agent.version",
  ...SESSION_KEYS,
  ...USER_KEYS,
  ...TRACE_NAME_KEYS,
  ...TAG_KEYS,
  "langfuse.trace.input",
  "langfuse.trace.output",
  ...ENVIRONMENT_KEYS
])
