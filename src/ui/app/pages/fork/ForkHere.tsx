import { Either } from "effect"
import { useMemo, useState } from "react"
import type { ForkId, SpanId, TraceId } from "../../../../domain/Ids.ts"
import type { SpanWire, TraceDetailWire } from "../../api/traceWire.ts"
import type { ApiCallError } from "../../api/client.ts"
import { navigate } from "../../shell/router.tsx"
import { useRunCall } from "../../shell/useApi.ts"
import { forkRequest, initialDraft, mockCandidates, type ForkDraft } from "../forks/forkDraft.ts"
import "./fork.css"

type Span = SpanWire
type TraceDetail = TraceDetailWire

type Progress =
  | { readonly step: "editing" }
  | { readonly step: "creating" }
  | { readonly step: "replaying"; readonly forkId: string }

/** The editor: the modified input, mocked tool outputs, then create → replay (server) → the comparison. */
const ForkEditor = (props: { readonly trace: TraceDetail; readonly span: Span; readonly onClose: () => void }) => {
  const { trace, span } = props
  const run = useRunCall()
  const [draft, setDraft] = useState<ForkDraft>(() => initialDraft(span))
  const candidates = useMemo(() => mockCandidates(trace.spans, trace.causalOrder, span.id), [trace, span.id])
  const [progress, setProgress] = useState<Progress>({ step: "editing" })
  const [error, setError] = useState<string | undefined>(undefined)
  const request = forkRequest(trace.id, span.id, draft)

  const submit = async () => {
    if (Either.isLeft(request)) return setError(request.left)
    setError(undefined)
    setProgress({ step: "creating" })
    let forkId: string | undefined
    try {
      const body = request.right
      const fork = await run((client) =>
        client.forks.create({
          payload: {
            trace_id: body.trace_id as TraceId,
            fork_point_span_id: body.fork_point_span_id as SpanId,
            // JSON.parse never yields undefined: the draft's input is a JSON value or the typed text.
            modified_input: body.modified_input as {} | null,
            ...(body.name === undefined ? {} : { name: body.name }),
            ...(body.mock_outputs === undefined ? {} : { mock_outputs: body.mock_outputs })
          }
        })
      )
      forkId = fork.id
      setProgress({ step: "replaying", forkId })
      await run((client) => client.forks.replay({ path: { forkId: fork.id as ForkId } }))
      navigate(`/ui/forks/${fork.id}`)
    } catch (e) {
      // A fork that was created but not replayed is still worth opening: its page shows it and can be replayed later.
      setProgress({ step: "editing" })
      setError(
        `${forkId === undefined ? "The fork was not created" : "The fork was created but its replay was refused"}: ${(e as ApiCallError).message}`
      )
      if (forkId !== undefined) navigate(`/ui/forks/${forkId}`)
    }
  }

  const busy = progress.step !== "editing"
  return (
    <div role="dialog" aria-label={`Fork from span ${span.name}`} className="fork-editor">
      <h2>Fork from “{span.name}”</h2>
      <p className="muted">
        The replay copies the spans before this one, then runs from here with the input below (server replay).
      </p>
      <label className="field">
        Fork name
        <input value={draft.name} onChange={(e) => setDraft({ ...draft, name: e.target.value })} disabled={busy} />
      </label>
      <label className="field">
        Modified input
        <textarea
          className="mono"
          rows={Math.min(16, Math.max(4, draft.inputText.split("\n").length + 1))}
          value={draft.inputText}
          onChange={(e) => setDraft({ ...draft, inputText: e.target.value })}
          disabled={busy}
        />
      </label>
      <label className="check">
        <input
          type="checkbox"
          checked={draft.inputIsJson}
          onChange={(e) => setDraft({ ...draft, inputIsJson: e.target.checked })}
          disabled={busy}
        />
        Input is JSON
      </label>
      {candidates.length > 0 && (
        <fieldset className="mocks">
          <legend>Mocked tool outputs</legend>
          {candidates.map((c) => {
            const mocked = Object.hasOwn(draft.mocks, c.tool)
            return (
              <div key={c.tool} className="mock">
                <label className="check">
                  <input
                    type="checkbox"
                    checked={mocked}
                    disabled={busy}
                    onChange={(e) => {
                      const mocks = { ...draft.mocks }
                      if (e.target.checked) mocks[c.tool] = c.recorded
                      else delete mocks[c.tool]
                      setDraft({ ...draft, mocks })
                    }}
                  />
                  Mock {c.tool}
                </label>
                {mocked && (
                  <textarea
                    aria-label={`Mocked output of ${c.tool}`}
                    className="mono"
                    rows={4}
                    value={draft.mocks[c.tool]}
                    disabled={busy}
                    onChange={(e) => setDraft({ ...draft, mocks: { ...draft.mocks, [c.tool]: e.target.value } })}
                  />
                )}
              </div>
            )
          })}
        </fieldset>
      )}
      {error !== undefined && (
        <p role="alert" className="error-text">
          {error}
        </p>
      )}
      {Either.isLeft(request) && error === undefined && <p className="muted">{request.left}</p>}
      <div className="actions">
        <button type="button" onClick={() => void submit()} disabled={busy || Either.isLeft(request)}>
          {progress.step === "creating"
            ? "Creating fork…"
            : progress.step === "replaying"
              ? "Replaying…"
              : "Fork and replay"}
        </button>
        <button type="button" className="quiet" onClick={props.onClose} disabled={busy}>
          Cancel
        </button>
      </div>
    </div>
  )
}

/**
 * "Fork here" for the trace page's span inspector: `<ForkHere trace={detail} span={selectedSpan} />`. It shows the
 * button, and below it the editor when pressed; on success it navigates to /ui/forks/{id} (the comparison).
 */
export const ForkHere = (props: { readonly trace: TraceDetail; readonly span: Span }) => {
  const [open, setOpen] = useState(false)
  if (!open)
    return (
      <button type="button" onClick={() => setOpen(true)}>
        Fork here
      </button>
    )
  return <ForkEditor key={props.span.id} trace={props.trace} span={props.span} onClose={() => setOpen(false)} />
}
