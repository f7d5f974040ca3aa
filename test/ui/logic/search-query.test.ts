import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { searchRequest } from "../../../src/ui/app/pages/search/searchQuery.ts"

describe("search URL → request", () => {
  test("no query, no request", () => {
    expect(searchRequest(new URLSearchParams("q=%20%20&model=gpt-4o"))).toEqual(Either.right(undefined))
  })

  test("the query and the filters, numbers as numbers, unknown keys ignored", () => {
    const request = Either.getOrThrow(
      searchRequest(new URLSearchParams("q=refund&span_type=tool_call&min_cost=0.5&min_duration_ms=200&span=x"))
    )
    expect(request?.query).toBe("refund")
    expect(request?.filters?.span_type).toBe("tool_call")
    expect(request?.filters?.min_cost).toBe(0.5)
    expect(request?.filters?.min_duration_ms).toBe(200)
  })

  test("a bad filter is named", () => {
    const bad = searchRequest(new URLSearchParams("q=x&span_type=banana&min_duration_ms=1.5"))
    expect(Either.isLeft(bad)).toBe(true)
    const message = Either.isLeft(bad) ? bad.left : ""
    expect(message).toContain("span_type")
    expect(message).toContain("min_duration_ms")
  })
})
