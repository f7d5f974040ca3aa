import { Either } from "effect"
import { causalSequence, type ComparableSpan } from "../compare/alignSpans.ts"
import { displayText } from "../compare/textDiff.ts"

/** A tool whose output the replay may be given instead of the recorded one. */
export interface MockCandidate {
  /** The key in `mock_outputs`: the tool's span name (the server also accepts a span id). */
  readonly tool: string
  /** The recorded output, as editable text (JSON). */
  readonly recorded: string
}

/** What the "Fork here" editor holds. */
export interface ForkDraft {
  readonly name: string
  /** The modified input as typed. */
  readonly inputText: string
  /** Whether `inputText` is read as JSON (else it is sent as a string). */
  readonly inputIsJson: boolean
  /** Tool name → mocked output text (JSON), for the tools the person chose to mock. */
  readonly mocks: Readonly<Record<string, string>>
}

/** The tools a replay from this span would reach: tool spans at or after the fork point in causal order, once per name. */
export const mockCandidates = (
  spans: ReadonlyArray<ComparableSpan>,
  causalOrder: ReadonlyArray<string> | undefined,
  forkPointId: string
): ReadonlyArray<MockCandidate> => {
  const ordered = causalSequence(spans, causalOrder)
  const start = ordered.findIndex((s) => s.id === forkPointId)
  if (start < 0) return []
  const seen = new Set<string>()
  const out: Array<MockCandidate> = []
  for (const span of ordered.slice(start)) {
    if ((span.span_type !== "tool_call" && span.span_type !== "tool_result") || seen.has(span.name)) continue
    seen.add(span.name)
    out.push({ tool: span.name, recorded: span.output === undefined ? "null" : JSON.stringify(span.output, null, 2) })
  }
  return out
}

/** The editor's first state: the fork point's recorded input, as text when it was a string, else as JSON. */
export const initialDraft = (forkPoint: ComparableSpan): ForkDraft => ({
  name: `fork of ${forkPoint.name}`.slice(0, 500),
  inputText: forkPoint.input === undefined ? "" : displayText(forkPoint.input),
  inputIsJson: forkPoint.input !== undefined && typeof forkPoint.input !== "string",
  mocks: {}
})

/** The body of POST /api/v1/forks (snake_case, as the contract takes it). */
export interface ForkRequestBody {
  readonly trace_id: string
  readonly fork_point_span_id: string
  readonly modified_input: unknown
  readonly name?: string
  readonly mock_outputs?: Record<string, unknown>
}

const parseJson = (text: string, what: string): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch (e) {
    return Either.left(`${what} is not valid JSON (${e instanceof Error ? e.message : String(e)}); put text in quotes`)
  }
}

/** The request the draft stands for, or the first thing wrong with it, in words the editor shows. */
export const forkRequest = (
  traceId: string,
  forkPointId: string,
  draft: ForkDraft
): Either.Either<ForkRequestBody, string> =>
  Either.gen(function* () {
    const modified_input = draft.inputIsJson ? yield* parseJson(draft.inputText, "The modified input") : draft.inputText
    const mock_outputs: Record<string, unknown> = {}
    for (const [tool, text] of Object.entries(draft.mocks)) {
      Object.defineProperty(mock_outputs, tool, {
        value: yield* parseJson(text, `The mocked output of '${tool}'`),
        enumerable: true,
        writable: true,
        configurable: true
      })
    }
    const name = draft.name.trim()
    if (name.length > 500) return yield* Either.left("The name is at most 500 characters")
    return {
      trace_id: traceId,
      fork_point_span_id: forkPointId,
      modified_input,
      ...(name === "" ? {} : { name }),
      ...(Object.keys(mock_outputs).length === 0 ? {} : { mock_outputs })
    }
  })
