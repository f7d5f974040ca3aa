/**
 * Tapedeck's TypeScript SDK: records an agent's runs as traces made of spans.
 *
 * ```ts
 * import { Tapedeck, wrapModel, wrapTool } from "@tapedeck/sdk"
 * const tapedeck = new Tapedeck({ baseUrl: "http://localhost:8080", apiKey: process.env.TAPEDECK_API_KEY! })
 * const run = tapedeck.startRun({ name: "book-flight", input: { question } })
 * const search = wrapTool(run, "search_flights", searchFlights)
 * …
 * await run.finish({ output: answer })
 * await tapedeck.close()
 * ```
 *
 * Plain TypeScript over `fetch`, no dependencies: Node 18+, Bun and Deno. Nothing it does throws into the agent.
 */
export { API_MAX_BATCH_SPANS, Tapedeck, type TapedeckOptions, type TapedeckStats } from "./Client.ts"
export {
  type FinishOptions,
  type Run,
  type RunOptions,
  type RunStatus,
  SPAN_TYPES,
  type SpanEndOptions,
  type SpanHandle,
  type SpanOptions,
  type SpanType
} from "./Run.ts"
export { type FetchLike, type Operation, TapedeckError } from "./Transport.ts"
export {
  extractUsage,
  type ModelOptions,
  type SpanTarget,
  type Usage,
  type WrapOptions,
  wrapModel,
  wrapTool
} from "./Wrap.ts"
export {
  connectReplay,
  type ReplayAgent,
  type ReplayConnection,
  type ReplayContext,
  type ReplayOptions,
  type ReplaySocket,
  type WebSocketClass
} from "./Replay.ts"
