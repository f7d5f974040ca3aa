import { Option } from "effect"
import { instantMillis } from "./Instant.ts"

/** A keyset position in the newest-first trace listing. */
export interface TraceCursor {
  readonly startedAt: string
  readonly id: string
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Opaque to clients: base64url of `[startedAt, id]`. */
export const encodeCursor = (cursor: TraceCursor) =>
  Buffer.from(JSON.stringify([cursor.startedAt, cursor.id])).toString("base64url")

export const decodeCursor = (text: string): Option.Option<TraceCursor> => {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, "base64url").toString("utf8"))
    if (!Array.isArray(value) || value.length !== 2) return Option.none()
    const [startedAt, id] = value
    if (typeof startedAt !== "string" || typeof id !== "string" || !UUID.test(id)) return Option.none()
    // Only what this service issues: toISOString() of an instant in range, exactly.
    const ms = instantMillis(startedAt)
    if (ms === undefined || new Date(ms).toISOString() !== startedAt) return Option.none()
    return Option.some({ startedAt, id })
  } catch {
    return Option.none()
  }
}
