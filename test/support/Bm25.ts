/**
 * A reference BM25 (k1 = 1.2, b = 0.75) over documents already split into terms, for the relevance harness: the
 * plain keyword search that hybrid retrieval must not lose to on keyword queries.
 */
export interface Bm25Doc {
  readonly id: string
  /** term → occurrences in the document */
  readonly terms: ReadonlyMap<string, number>
}

export const bm25 = (docs: ReadonlyArray<Bm25Doc>, k1 = 1.2, b = 0.75) => {
  const lengths = docs.map((d) => [...d.terms.values()].reduce((a, n) => a + n, 0))
  const avg = lengths.reduce((a, n) => a + n, 0) / Math.max(1, docs.length)
  const df = new Map<string, number>()
  for (const d of docs) for (const t of d.terms.keys()) df.set(t, (df.get(t) ?? 0) + 1)
  const idf = (t: string) => {
    const n = df.get(t) ?? 0
    return Math.log(1 + (docs.length - n + 0.5) / (n + 0.5))
  }
  /** Document ids by descending score; documents without any query term are left out. */
  return (queryTerms: ReadonlyArray<string>): Array<string> => {
    const terms = [...new Set(queryTerms)]
    const scored: Array<[string, number]> = []
    docs.forEach((d, i) => {
      let s = 0
      for (const t of terms) {
        const tf = d.terms.get(t) ?? 0
        if (tf > 0) s += (idf(t) * (tf * (k1 + 1))) / (tf + k1 * (1 - b + (b * lengths[i]!) / avg))
      }
      if (s > 0) scored.push([d.id, s])
    })
    return scored.sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1)).map(([id]) => id)
  }
}
