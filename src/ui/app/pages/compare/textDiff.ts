import { diffLines, diffWordsWithSpace } from "diff"

/** A run of text that both sides share, or that only one side has. */
export interface DiffPart {
  readonly kind: "same" | "added" | "removed"
  readonly text: string
}

/** How a span's input or output reads as text: a string as itself, anything else as indented JSON. */
export const displayText = (value: unknown): string => {
  if (value === undefined) return ""
  if (typeof value === "string") return value
  return JSON.stringify(value, null, 2) ?? String(value)
}

/** Past this many characters a side is diffed line by line only (word diffs of large texts are slow). */
const WORD_DIFF_MAX_CHARS = 4000
const DIFF_TIMEOUT_MS = 500

/**
 * A text diff of two values, for highlighting: word by word for short single-line texts (a changed
 * prompt), line by line otherwise (JSON, long texts). When the diff would take too long the whole left
 * side is shown removed and the whole right side added, which is still a correct (if coarse) diff.
 * Joining the `same` and `removed` parts gives the left text; `same` and `added`, the right.
 */
export const textDiff = (before: unknown, after: unknown): ReadonlyArray<DiffPart> => {
  const a = displayText(before)
  const b = displayText(after)
  if (a === b) return a === "" ? [] : [{ kind: "same", text: a }]
  const byWords = !a.includes("\n") && !b.includes("\n") && a.length + b.length <= WORD_DIFF_MAX_CHARS
  const changes = byWords
    ? diffWordsWithSpace(a, b, { timeout: DIFF_TIMEOUT_MS })
    : diffLines(a, b, { timeout: DIFF_TIMEOUT_MS })
  if (changes === undefined) {
    return [
      ...(a === "" ? [] : [{ kind: "removed" as const, text: a }]),
      ...(b === "" ? [] : [{ kind: "added" as const, text: b }])
    ]
  }
  const parts: Array<DiffPart> = []
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!
    const next = changes[i + 1]
    // A block of lines replaced by another: diff the two blocks word by word, so a changed word inside
    // a JSON line is what stands out rather than the whole line.
    if (!byWords && change.removed && next?.added && change.value.length + next.value.length <= WORD_DIFF_MAX_CHARS) {
      const words = diffWordsWithSpace(change.value, next.value, { timeout: DIFF_TIMEOUT_MS })
      if (words !== undefined) {
        for (const w of words)
          if (w.value.length > 0)
            parts.push({ kind: w.added ? "added" : w.removed ? "removed" : "same", text: w.value })
        i++
        continue
      }
    }
    if (change.value.length > 0)
      parts.push({ kind: change.added ? "added" : change.removed ? "removed" : "same", text: change.value })
  }
  return parts
}
