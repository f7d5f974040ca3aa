import { describe, expect, test } from "bun:test"
import { contentWords, RUN_QUERIES, runQueryHalves, runSpans } from "../../fixtures/search/agentRuns.ts"

const spans = runSpans()

describe("the agent-runs relevance set", () => {
  test("has at least 300 spans over at least 12 topics and 60 queries, half or more of them paraphrases", () => {
    expect(spans.length).toBeGreaterThanOrEqual(300)
    expect(new Set(spans.map((s) => s.topic)).size).toBeGreaterThanOrEqual(12)
    expect(RUN_QUERIES.length).toBeGreaterThanOrEqual(60)
    expect(RUN_QUERIES.filter((q) => q.style === "paraphrase").length * 2).toBeGreaterThanOrEqual(RUN_QUERIES.length)
    expect(new Set(spans.map((s) => s.span.id)).size).toBe(spans.length)
  })

  test("every query targets a situation that has spans", () => {
    for (const q of RUN_QUERIES) expect(spans.filter((s) => s.situation === q.target).length).toBeGreaterThan(0)
  })

  test("a paraphrase shares no content word (crudely stemmed) with any span of its situation", () => {
    const offending: Array<string> = []
    for (const q of RUN_QUERIES.filter((q) => q.style === "paraphrase")) {
      const spanWords = new Set(spans.filter((s) => s.situation === q.target).flatMap((s) => [...contentWords(s.text)]))
      const shared = [...contentWords(q.text)].filter((w) => spanWords.has(w))
      if (shared.length > 0) offending.push(`${q.text}: ${shared.join(", ")}`)
    }
    expect(offending).toEqual([])
  })

  test("a lexical query does share words with its situation", () => {
    for (const q of RUN_QUERIES.filter((q) => q.style === "lexical")) {
      const spanWords = new Set(spans.filter((s) => s.situation === q.target).flatMap((s) => [...contentWords(s.text)]))
      expect([...contentWords(q.text)].some((w) => spanWords.has(w))).toBe(true)
    }
  })

  test("the halves split every style evenly and together hold every query once", () => {
    const { heldOut, tuning } = runQueryHalves()
    expect(tuning.length + heldOut.length).toBe(RUN_QUERIES.length)
    expect(new Set([...tuning, ...heldOut]).size).toBe(RUN_QUERIES.length)
    for (const style of ["lexical", "paraphrase"] as const) {
      const a = tuning.filter((q) => q.style === style).length
      const b = heldOut.filter((q) => q.style === style).length
      expect(Math.abs(a - b)).toBeLessThanOrEqual(1)
    }
  })

  test("contentWords drops function words and splits identifiers", () => {
    expect([...contentWords("the cardDeclined of a card_error")].sort()).toEqual(["card", "declin", "error"].sort())
  })
})
