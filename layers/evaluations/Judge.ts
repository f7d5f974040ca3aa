import { Effect, Either } from "effect"
import type { CriterionScore } from "#src/domain/Evaluation"
import { weightedScore } from "#src/domain/EvaluationScoring"
import type { TraceDetailWire } from "#src/domain/Trace"
import { type ChatMessage, LlmClient } from "../llm/LlmClient.ts"
import { ModelPrices } from "../llm/Prices.ts"
import { readJudgeAnswer } from "#src/domain/evaluation/JudgeAnswerReader"
import { isStructureRefusal, nextMode, OutputModeMemory, responseFormatFor } from "./JudgeOutputMode.ts"
import { clip, judgeMessages, renderTrace, retryNote } from "#src/domain/evaluation/JudgePrompt"

/** How many criteria of one run are asked at once. */
export const CRITERION_CONCURRENCY = 4
/**
 * The most a judge may write per answer. `{score, reason}` needs far less, but reasoning models (a `<think>`
 * block before the answer) need room to reach the answer at all.
 */
const MAX_ANSWER_TOKENS = 1024

export interface JudgeCriterion {
  readonly name: string
  readonly description: string
  readonly weight: number
}

interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  /** USD, or null when a call's model has no known price. */
  readonly costUsd: number | null
}

/** A run's outcome: judged (every criterion scored), or not, with the reason; the usage either way. */
export type JudgeOutcome =
  | (Usage & {
      readonly _tag: "Judged"
      readonly score: number
      readonly criterionScores: ReadonlyArray<CriterionScore>
      readonly reasoning: string
    })
  | (Usage & {
      readonly _tag: "NotJudged"
      readonly error: string
      /** The criteria that were scored before or beside the failure. */
      readonly criterionScores: ReadonlyArray<CriterionScore>
    })

type CriterionOutcome = Usage & { readonly result: Either.Either<CriterionScore, string> }

const addCost = (a: number | null, b: number | null) => (a === null || b === null ? null : a + b)
/** Rounded to 1e-12 USD, like the price table, so sums carry no float noise. */
const roundUsd = (n: number | null) => (n === null ? null : Math.round(n * 1e12) / 1e12)

/**
 * The LLM judge: asks the model provider (the OpenAI-compatible LlmClient shared with replay) about each
 * criterion of a trace with the fixed rubric prompt (src/domain/evaluation/JudgePrompt.ts), asking for structure
 * where the provider gives it (JudgeOutputMode.ts: a strict JSON schema, else a JSON object, else plain text,
 * remembered per base URL and model), reads the answer tolerantly (src/domain/evaluation/JudgeAnswerReader.ts,
 * tool calls included) and asks once more after a malformed answer. Never invents a score: with no provider, a
 * provider failure or a second malformed answer, the outcome is NotJudged with the reason.
 */
export class Judge extends Effect.Service<Judge>()("tapedeck/Judge", {
  effect: Effect.gen(function* () {
    const llm = yield* LlmClient
    const prices = yield* ModelPrices

    const outputModes = new OutputModeMemory()

    /** One answer, in the best output mode the provider accepts; a refused mode is stepped down from and remembered. */
    const ask = (model: string, messages: ReadonlyArray<ChatMessage>) =>
      Effect.gen(function* () {
        let mode = outputModes.modeFor(llm.baseUrl, model)
        for (;;) {
          const format = responseFormatFor(mode)
          const answered = yield* Effect.either(
            llm.chat({
              model,
              messages,
              temperature: 0,
              max_tokens: MAX_ANSWER_TOKENS,
              ...(format === undefined ? {} : { response_format: format })
            })
          )
          if (Either.isRight(answered)) {
            yield* Effect.annotateCurrentSpan("judge.output_mode", mode)
            return answered.right
          }
          const next = nextMode(mode)
          if (next === undefined || !isStructureRefusal(answered.left)) return yield* answered.left
          yield* Effect.logInfo(`the judge's provider refused response_format ${mode}; using ${next} for ${model}`)
          outputModes.remember(llm.baseUrl, model, next)
          mode = next
        }
      })

    const judgeCriterion = (model: string, criterion: JudgeCriterion, rendered: string) =>
      Effect.gen(function* () {
        let usage: Usage = { inputTokens: 0, outputTokens: 0, costUsd: 0 }
        const messages = judgeMessages(criterion, rendered)
        let conversation: ReadonlyArray<ChatMessage> = messages
        let malformed = ""
        for (let attempt = 1; attempt <= 2; attempt++) {
          const answered = yield* Effect.either(ask(model, conversation))
          if (Either.isLeft(answered)) {
            return { ...usage, result: Either.left(answered.left.message) } satisfies CriterionOutcome
          }
          const response = answered.right
          usage = {
            inputTokens: usage.inputTokens + response.usage.inputTokens,
            outputTokens: usage.outputTokens + response.usage.outputTokens,
            costUsd: addCost(
              usage.costUsd,
              prices.costOf(response.model || model, response.usage.inputTokens, response.usage.outputTokens) ??
                prices.costOf(model, response.usage.inputTokens, response.usage.outputTokens) ??
                null
            )
          }
          const parsed = readJudgeAnswer(
            { content: response.message.content, toolCalls: response.message.tool_calls },
            { criterion: criterion.name }
          )
          if (Either.isRight(parsed)) {
            const { score, reason } = parsed.right
            return {
              ...usage,
              result: Either.right({ name: criterion.name, weight: criterion.weight, score, reason })
            } satisfies CriterionOutcome
          }
          malformed = parsed.left
          conversation = [
            ...messages,
            // As text: an assistant message with tool_calls would need tool results after it.
            {
              role: "assistant",
              content: clip(
                response.message.content ||
                  JSON.stringify(response.message.tool_calls ?? response.message.content ?? ""),
                2000
              )
            },
            { role: "user", content: retryNote(malformed) }
          ]
        }
        return {
          ...usage,
          result: Either.left(`malformed answer twice (${malformed})`)
        } satisfies CriterionOutcome
      })

    /** Judges every criterion of the trace (a few at once) and combines them into the run's score. */
    const judge = Effect.fn("Judge.judge")(function* (
      criteria: ReadonlyArray<JudgeCriterion>,
      trace: TraceDetailWire,
      model: string
    ) {
      yield* Effect.annotateCurrentSpan({ "judge.model": model, "judge.criteria": criteria.length })
      if (!llm.configured) {
        return {
          _tag: "NotJudged",
          error: "no LLM provider is configured (set TAPEDECK_LLM_BASE_URL): the trace was not judged",
          criterionScores: [],
          inputTokens: 0,
          outputTokens: 0,
          costUsd: 0
        } satisfies JudgeOutcome as JudgeOutcome
      }
      const rendered = renderTrace(trace)
      const outcomes = yield* Effect.forEach(criteria, (c) => judgeCriterion(model, c, rendered), {
        concurrency: CRITERION_CONCURRENCY
      })
      const usage: Usage = {
        inputTokens: outcomes.reduce((n, o) => n + o.inputTokens, 0),
        outputTokens: outcomes.reduce((n, o) => n + o.outputTokens, 0),
        costUsd: roundUsd(outcomes.reduce<number | null>((n, o) => addCost(n, o.costUsd), 0))
      }
      const scored = outcomes.flatMap((o) => (Either.isRight(o.result) ? [o.result.right] : []))
      const failures = outcomes.flatMap((o, i) =>
        Either.isLeft(o.result) ? [`criterion "${criteria[i]!.name}": ${o.result.left}`] : []
      )
      if (failures.length > 0) {
        return {
          _tag: "NotJudged",
          error: clip(`the judge could not score the trace: ${failures.join("; ")}`, 4000),
          criterionScores: scored,
          ...usage
        } satisfies JudgeOutcome as JudgeOutcome
      }
      return {
        _tag: "Judged",
        score: weightedScore(scored),
        criterionScores: scored,
        reasoning: scored.map((c) => `${c.name} (${c.score}): ${c.reason}`).join("\n"),
        ...usage
      } satisfies JudgeOutcome as JudgeOutcome
    })

    return { judge } as const
  })
}) {}
