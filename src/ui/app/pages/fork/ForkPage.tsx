import { useEffect, useState } from "react"
import type { ApiCallError } from "../../api/client.ts"
import type { ForkId } from "../../../../domain/Ids.ts"
import { formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useApi, useRunCall } from "../../shell/useApi.ts"
import { TracePairComparison } from "../compare/ComparePage.tsx"
import { displayText } from "../compare/textDiff.ts"
import "../compare/compare.css"

/** How often a replaying fork is asked for again. */
const POLL_MS = 1000

/** /ui/forks/{id}: the fork (what was changed) and, once replayed, its source and result compared. */
export const ForkPage = (props: PageProps) => {
  const forkId = props.params.forkId! as ForkId
  const fork = useApi((client) => client.forks.get({ path: { forkId } }), [forkId])
  const run = useRunCall()
  const [replayError, setReplayError] = useState<string | undefined>(undefined)
  const [replaying, setReplaying] = useState(false)
  // A pending fork (never replayed, or its replay was refused) and a finished one may be replayed: each replay is a
  // new generation with a new result trace.
  const replay = async () => {
    setReplaying(true)
    setReplayError(undefined)
    try {
      await run((client) => client.forks.replay({ path: { forkId } }))
    } catch (e) {
      setReplayError((e as ApiCallError).message)
    } finally {
      setReplaying(false)
      fork.reload()
    }
  }
  const status = fork.data?.status
  const reload = fork.reload
  useEffect(() => {
    // A replay that runs as a job (or in a connected SDK) ends later: ask again until it has.
    if (status !== "replaying" && status !== "pending") return
    const timer = setTimeout(reload, POLL_MS)
    return () => clearTimeout(timer)
  }, [status, fork.data, reload])

  if (fork.status === "error" && fork.data === undefined) {
    return (
      <section className="page">
        <p role="alert" className="error-text">
          {fork.error.code === "not_found" ? "No such fork in this account." : fork.error.message}
        </p>
      </section>
    )
  }
  if (fork.data === undefined)
    return (
      <section className="page" aria-busy="true">
        Loading…
      </section>
    )
  const f = fork.data
  return (
    <section className="page">
      <h1>Fork {f.name ?? f.id}</h1>
      <dl className="cmp-facts fork-facts">
        <dt>Status</dt>
        <dd>
          <span
            className={`badge ${f.status === "failed" ? "removed" : f.status === "completed" ? "inserted" : "changed"}`}
          >
            {f.status}
          </span>
          {f.mode ? <span className="muted"> · {f.mode} replay</span> : null}
        </dd>
        <dt>Source trace</dt>
        <dd>
          <Link href={`/ui/traces/${f.traceId}?span=${f.forkPointSpanId}`}>{f.traceId}</Link>{" "}
          <span className="muted">at span {f.forkPointSpanId.slice(0, 8)}</span>
        </dd>
        <dt>Result trace</dt>
        <dd>
          {f.resultTraceId ? (
            <Link href={`/ui/traces/${f.resultTraceId}`}>{f.resultTraceId}</Link>
          ) : (
            <span className="muted">not replayed yet</span>
          )}
        </dd>
        <dt>Modified input</dt>
        <dd>
          <pre className="inline-pre">{displayText(f.modifiedInput)}</pre>
        </dd>
        {f.error ? (
          <>
            <dt>Error</dt>
            <dd className="error-text">{f.error}</dd>
          </>
        ) : null}
        {f.createdAt ? (
          <>
            <dt>Created</dt>
            <dd>{formatTime(new Date(f.createdAt))}</dd>
          </>
        ) : null}
      </dl>
      {f.status === "replaying" ? (
        <p role="status" className="muted">
          Replaying…
        </p>
      ) : (
        <p>
          <button type="button" disabled={replaying} onClick={() => void replay()}>
            {replaying ? "Replaying…" : f.status === "pending" ? "Replay" : "Replay again"}
          </button>
        </p>
      )}
      {replayError !== undefined && (
        <p role="alert" className="error-text">
          {replayError}
        </p>
      )}
      {f.resultTraceId && f.status !== "replaying" && (
        <TracePairComparison leftId={f.traceId} rightId={f.resultTraceId} />
      )}
    </section>
  )
}
