/** A trace's status as a small coloured label (the text is the status itself, for screen readers too). */
export const StatusBadge = (props: { readonly status: string }) => (
  <span className={`badge status-${props.status}`}>{props.status}</span>
)
