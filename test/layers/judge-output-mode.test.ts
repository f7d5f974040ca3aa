import { describe, expect, test } from "bun:test"
import { isStructureRefusal, nextMode, OUTPUT_MODES, OutputModeMemory, responseFormatFor } from "#layers/evaluations/JudgeOutputMode"
import { LlmUnavailable } from "#src/domain/Errors"

const httpError = (status: number, message: string) => new LlmUnavailable({ reason: "http_error", status, message })

describe("judge output modes", () => {
  test("the order is json_schema, json_object, text; plain text sends no response_format", () => {
    expect(OUTPUT_MODES).toEqual(["json_schema", "json_object", "text"])
    expect(nextMode("json_schema")).toBe("json_object")
    expect(nextMode("json_object")).toBe("text")
    expect(nextMode("text")).toBeUndefined()
    expect(responseFormatFor("json_schema")).toMatchObject({ type: "json_schema", json_schema: { name: "judge_verdict", strict: true } })
    expect(responseFormatFor("json_object")).toEqual({ type: "json_object" })
    expect(responseFormatFor("text")).toBeUndefined()
  })

  test("a refusal is a 400 or 422 naming the structure; nothing else steps down", () => {
    expect(isStructureRefusal(httpError(400, "LLM provider at x answered HTTP 400: Invalid parameter: 'response_format' of type 'json_schema' is not supported"))).toBe(true)
    expect(isStructureRefusal(httpError(400, "LLM provider at x answered HTTP 400: json_schema response format is not supported by this model"))).toBe(true)
    expect(isStructureRefusal(httpError(422, "LLM provider at x answered HTTP 422: unsupported response_format"))).toBe(true)
    expect(isStructureRefusal(httpError(400, "LLM provider at x answered HTTP 400: maximum context length exceeded"))).toBe(false)
    expect(isStructureRefusal(httpError(500, "LLM provider at x answered HTTP 500: response_format handler crashed"))).toBe(false)
    expect(isStructureRefusal(new LlmUnavailable({ reason: "network", message: "response_format" }))).toBe(false)
  })

  test("the memory is per (base URL, model), starts at the best mode and forgets the oldest pair beyond its bound", () => {
    const memory = new OutputModeMemory(2)
    expect(memory.modeFor("http://a/v1", "m")).toBe("json_schema")
    memory.remember("http://a/v1", "m", "json_object")
    expect(memory.modeFor("http://a/v1", "m")).toBe("json_object")
    expect(memory.modeFor("http://b/v1", "m")).toBe("json_schema")
    expect(memory.modeFor("http://a/v1", "m2")).toBe("json_schema")
    memory.remember("http://b/v1", "m", "text")
    memory.remember("http://a/v1", "m", "json_object") // refreshed: now the newest
    memory.remember("http://c/v1", "m", "text")
    expect(memory.size).toBe(2)
    expect(memory.modeFor("http://b/v1", "m")).toBe("json_schema") // the oldest went
    expect(memory.modeFor("http://a/v1", "m")).toBe("json_object")
  })
})
