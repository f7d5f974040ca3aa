import { appendFileSync, existsSync, readFileSync } from "node:fs"
import { Effect } from "effect"
import { traceSink } from "tapedeck"

/**
 * Appends each terminal trace to `path` as one JSON line `{key, account, trace}`. A line already written for the
 * same idempotency key is not written again, so a repeated delivery (at least once) leaves one line.
 */
export const jsonlSink = (path: string) =>
  traceSink({
    name: "jsonl",
    deliver: (delivery) =>
      Effect.try(() => {
        const written = existsSync(path) ? readFileSync(path, "utf8") : ""
        if (written.includes(`"key":${JSON.stringify(delivery.idempotencyKey)}`)) return
        appendFileSync(
          path,
          `${JSON.stringify({ key: delivery.idempotencyKey, account: delivery.accountId, trace: delivery.trace })}\n`
        )
      })
  })

export const readLines = (
  path: string
): ReadonlyArray<{ key: string; account: string; trace: { id: string; name: string } }> =>
  existsSync(path)
    ? readFileSync(path, "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l))
    : []
