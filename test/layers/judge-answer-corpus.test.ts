import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { readJudgeAnswer } from "#src/domain/evaluation/JudgeAnswerReader"
import heldout from "../fixtures/judge-answers/heldout.json"
import tuning from "../fixtures/judge-answers/tuning.json"

interface CorpusEntry {
  readonly id: string
  readonly family: string
  readonly criterion?: string
  readonly content: string | null
  readonly toolCalls?: unknown
  readonly promptScale?: readonly [number, number]
  readonly expect: { readonly score?: number; readonly reason?: string; readonly malformed?: boolean }
}

/** Why the reader's verdict on `entry` differs from the expected one; undefined when it matches. */
const mismatch = (entry: CorpusEntry): string | undefined => {
  const read = readJudgeAnswer(
    { content: entry.content, toolCalls: entry.toolCalls },
    {
      criterion: entry.criterion ?? "correct",
      ...(entry.promptScale === undefined ? {} : { scale: { min: entry.promptScale[0], max: entry.promptScale[1] } })
    }
  )
  if (entry.expect.malformed === true) {
    if (Either.isRight(read)) return `expected malformed, read ${JSON.stringify(read.right)}`
    if (read.left.trim() === "") return "malformed without a reason"
    return undefined
  }
  if (Either.isLeft(read)) return `expected score ${entry.expect.score}, got malformed: ${read.left}`
  if (Math.abs(read.right.score - entry.expect.score!) > 5e-5)
    return `expected score ${entry.expect.score}, read ${read.right.score}`
  if (entry.expect.reason !== undefined && read.right.reason !== entry.expect.reason) {
    return `expected reason ${JSON.stringify(entry.expect.reason)}, read ${JSON.stringify(read.right.reason)}`
  }
  return undefined
}

describe("judge answer corpus", () => {
  test("both halves are well formed: unique ids, each labelled with a family and an expected outcome", () => {
    const all = [...tuning, ...heldout] as ReadonlyArray<CorpusEntry>
    expect(all.length).toBeGreaterThanOrEqual(30)
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length)
    for (const e of all) {
      expect(e.family.length).toBeGreaterThan(0)
      expect(e.expect.malformed === true || typeof e.expect.score === "number").toBe(true)
    }
    // Both halves exercise success and failure.
    for (const half of [tuning, heldout] as Array<ReadonlyArray<CorpusEntry>>) {
      expect(half.some((e) => e.expect.malformed === true)).toBe(true)
      expect(half.some((e) => e.expect.malformed !== true)).toBe(true)
    }
  })

  for (const entry of tuning as ReadonlyArray<CorpusEntry>) {
    test(`tuning: ${entry.id} (${entry.family})`, () => {
      expect(mismatch(entry)).toBeUndefined()
    })
  }

  test("held-out half: the figure is printed, misses are listed, not tuned away", () => {
    const entries = heldout as ReadonlyArray<CorpusEntry>
    const misses = entries.flatMap((e) => {
      const why = mismatch(e)
      return why === undefined ? [] : [`  ${e.id} (${e.family}): ${why}`]
    })
    const right = entries.length - misses.length
    console.log(`judge answer corpus, held-out half: ${right} of ${entries.length} read as expected`)
    if (misses.length > 0) console.log(misses.join("\n"))
    // A floor that only a broken reader falls under; the figure itself is reported, not asserted.
    expect(right).toBeGreaterThanOrEqual(Math.ceil(entries.length / 2))
  })
})
