import { describe, expect, test } from "bun:test"
import { Either, Schema } from "effect"
import { ListTracesParams } from "../../../src/domain/Trace.ts"
import { firstRequestUrl } from "../../../src/ui/app/api/prefetch.ts"
import { filtersToSearch, listParams } from "../../../src/ui/app/pages/traces/traceFilters.ts"

describe("the prefetched first request", () => {
  test("a trace page asks for its trace; the list page for its first page; other pages for nothing", () => {
    const id = crypto.randomUUID()
    expect(firstRequestUrl(`/ui/traces/${id}`, new URLSearchParams("span=x"))).toBe(`/api/v1/traces/${id}`)
    expect(firstRequestUrl("/ui", new URLSearchParams())).toBe("/api/v1/traces?limit=50&total=capped")
    expect(firstRequestUrl("/ui/search", new URLSearchParams("q=x"))).toBeUndefined()
    expect(firstRequestUrl("/ui/sessions/abc", new URLSearchParams())).toBeUndefined()
  })

  test("the list's prefetch asks for what the page would: the same parameters once decoded by the contract", () => {
    const filters = {
      name: "refund",
      status: "failed",
      min_cost: "0.5",
      date_from: "2026-01-01T00:00:00.000Z",
      has_error: "true"
    }
    const url = new URL(
      firstRequestUrl("/ui/traces", new URLSearchParams(`${filtersToSearch(filters)}&span=ignored`))!,
      "http://x"
    )
    const prefetched = Schema.decodeUnknownSync(ListTracesParams)(Object.fromEntries(url.searchParams))
    expect(prefetched).toEqual(Either.getOrThrow(listParams(filters, { limit: 50 })))
  })
})
