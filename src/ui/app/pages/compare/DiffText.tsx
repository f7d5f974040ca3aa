import { useMemo } from "react"
import { textDiff } from "./textDiff.ts"

/** Two values as one text with what the right side removed struck out and what it added highlighted. */
export const DiffText = (props: { readonly before: unknown; readonly after: unknown; readonly label: string }) => {
  const parts = useMemo(() => textDiff(props.before, props.after), [props.before, props.after])
  if (parts.length === 0) return <p className="muted">{props.label}: none on either side</p>
  const changed = parts.some((p) => p.kind !== "same")
  return (
    <figure className="diff-text" aria-label={props.label}>
      <figcaption>
        {props.label}{" "}
        {changed ? <span className="badge changed">changed</span> : <span className="muted">unchanged</span>}
      </figcaption>
      <pre>
        {parts.map((part, i) =>
          part.kind === "added" ? (
            <ins key={i}>{part.text}</ins>
          ) : part.kind === "removed" ? (
            <del key={i}>{part.text}</del>
          ) : (
            <span key={i}>{part.text}</span>
          )
        )}
      </pre>
    </figure>
  )
}
