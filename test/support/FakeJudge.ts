import { type FakeOpenAi, type FakeReply, type RecordedRequest, startFakeOpenAi } from "./FakeOpenAi.ts"

/**
 * A fake OpenAI-compatible judge that answers in the styles real model families use (the same families as the
 * answer corpus in test/fixtures/judge-answers), so the whole path — run, scores, gate, regression — is driven
 * by answers in each form rather than by the exact `{score, reason}`.
 *
 * What it answers is read from the rubric prompt: the trace's name is `<style>|<score>` (the score every
 * criterion gets, in 0..1) and the criterion is named on its own line. A model named in `refusesJsonSchema`
 * answers 400 naming response_format to any request asking for `json_schema`, as providers without structured
 * outputs do.
 */
export const JUDGE_STYLES = {
  /** GPT-4o with response_format json_schema: exactly the schema. */
  gpt4o_json_schema: (score, reason) => ({ content: JSON.stringify({ score, reason }) }),
  /** GPT-4o with json_object: extra keys and `reasoning`. */
  gpt4o_json_object_extras: (score, reason, criterion) => ({
    content: JSON.stringify({ score, reasoning: reason, confidence: "high", criterion }, null, 2)
  }),
  /** Claude through an OpenAI-compatible gateway: a leading sentence, a fenced object, a closing remark. */
  claude_gateway_prose_fence: (score, reason) => ({
    content: `Here is my evaluation of the trace.\n\n\`\`\`json\n${JSON.stringify({ score, reason }, null, 2)}\n\`\`\`\n\nLet me know if you need more.`
  }),
  /** Llama through Ollama: the score as a string, `explanation`. */
  ollama_string_score: (score, reason) => ({ content: JSON.stringify({ score: String(score), explanation: reason }) }),
  /** Mistral through vLLM: `rating` on a declared 1-10 scale. */
  vllm_rating_1_10: (score, reason) => ({
    content: JSON.stringify({ rating: 1 + 9 * score, scale: "1-10", rationale: reason })
  }),
  /** A forced tool call, no content. */
  tool_call: (score, reason) => ({
    content: null,
    toolCalls: [
      {
        id: "call_1",
        type: "function",
        function: { name: "submit_verdict", arguments: JSON.stringify({ score, reason }) }
      }
    ]
  }),
  /** Every criterion it saw in one list, with an overall score that is not the one asked. */
  per_criterion_list: (score, reason, criterion) => ({
    content: JSON.stringify({
      overall_score: 0.123,
      criteria: [
        { name: "something else", score: 0, reason: "n/a" },
        { name: criterion, score, reason }
      ]
    })
  }),
  /** A reasoning model through Ollama: a `<think>` block (with a draft object) before the answer. */
  think_block: (score, reason) => ({
    content: `<think>First guess {"score": 0.01}. Let me look again at the steps.</think>\n${JSON.stringify({ score, reason })}`
  }),
  /** Never readable: a Python dict. */
  python_dict: (score) => ({ content: `{'score': ${score}, 'reason': 'looks fine'}` })
} satisfies Record<string, (score: number, reason: string, criterion: string) => FakeReply>

export type JudgeStyle = keyof typeof JUDGE_STYLES

const userPrompt = (r: RecordedRequest): string => r.body?.messages?.[1]?.content ?? ""
export const traceNameOf = (r: RecordedRequest) => /^Trace: (.*) — status/m.exec(userPrompt(r))?.[1] ?? ""
export const criterionOf = (r: RecordedRequest) => /^Criterion: (.*)$/m.exec(userPrompt(r))?.[1] ?? ""
/** The structure a request asked for: json_schema, json_object or text. */
export const outputModeOf = (r: RecordedRequest): string => r.body?.response_format?.type ?? "text"

/** The trace name that makes the fake judge answer in `style` with `score`. */
export const styledTraceName = (style: JudgeStyle, score: number) => `${style}|${score}`

export const startFakeJudge = (options: { readonly refusesJsonSchema?: ReadonlyArray<string> } = {}): FakeOpenAi =>
  startFakeOpenAi((request) => {
    if (options.refusesJsonSchema?.includes(request.body?.model) && outputModeOf(request) === "json_schema") {
      return {
        status: 400,
        errorMessage: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."
      }
    }
    const [style, score] = traceNameOf(request).split("|")
    const answer = JUDGE_STYLES[style as JudgeStyle]
    if (answer === undefined) return { content: "I cannot tell." }
    const criterion = criterionOf(request)
    return answer(Number(score), `${criterion} judged ${score}`, criterion)
  })
