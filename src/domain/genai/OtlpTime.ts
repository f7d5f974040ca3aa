import { isDigit } from "./Attributes.ts"
import { MAX_MS } from "./Limits.ts"

/** Unix nanoseconds (decimal string) as epoch milliseconds plus the sub-millisecond rest; undefined if invalid. */
export const nanos = (s: string): { ms: number; rest: number } | undefined => {
  if (typeof s !== "string" || s.length === 0 || s.length > 30) return undefined
  for (let i = 0; i < s.length; i++) if (!isDigit(s.charCodeAt(i))) return undefined
  if (s.length <= 6) return { ms: 0, rest: Number(s) }
  const ms = Number(s.slice(0, -6))
  // Instants past year 9999 cannot be stored; they are clamped rather than refused.
  return ms > MAX_MS ? { ms: MAX_MS, rest: 0 } : { ms, rest: Number(s.slice(-6)) }
}
