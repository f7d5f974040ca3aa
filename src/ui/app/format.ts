import { DateTime } from "effect"

export type InstantLike = DateTime.Utc | Date | string

/** Milliseconds since the epoch of an instant: decoded (DateTime, Date) or as the API sends it (an ISO string). */
export const millis = (instant: InstantLike | undefined | null): number | undefined => {
  if (instant == null) return undefined
  if (typeof instant === "string") {
    const ms = Date.parse(instant)
    return Number.isNaN(ms) ? undefined : ms
  }
  return instant instanceof Date ? instant.getTime() : DateTime.toEpochMillis(instant)
}

/** `2026-11-26 14:07:08` in the browser's zone (dense, sortable). */
export const formatTime = (instant: InstantLike | undefined | null): string => {
  const ms = millis(instant)
  if (ms === undefined) return "—"
  const d = new Date(ms)
  const pad = (n: number) => String(n).padStart(2, "0")
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
}

/** A duration: `850 ms`, `2.4 s`, `3 m 12 s`. */
export const formatDuration = (ms: number | undefined | null): string => {
  if (ms == null || !Number.isFinite(ms)) return "—"
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`
  const minutes = Math.floor(ms / 60_000)
  return `${minutes} m ${Math.round((ms - minutes * 60_000) / 1000)} s`
}

const grouping = new Intl.NumberFormat("en-US")

/** Token counts with thousands separators: `12,480` (one formatter for all: rows format many while scrolling). */
export const formatCount = (n: number | undefined | null): string => (n == null ? "—" : grouping.format(n))

/** A cost in dollars as the API gives it (a decimal string): `$0.0412`. */
export const formatCost = (cost: string | number | undefined | null): string => {
  if (cost == null || cost === "") return "—"
  const n = typeof cost === "number" ? cost : Number(cost)
  if (!Number.isFinite(n)) return String(cost)
  if (n === 0) return "$0"
  return `$${n < 0.01 ? n.toPrecision(2) : n.toFixed(4)}`
}
