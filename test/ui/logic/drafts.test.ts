import { describe, expect, test } from "bun:test"
import { OpenApi } from "@effect/platform"
import { Either, FastCheck as fc, Schema } from "effect"
import { apiWithGuardrailTypes } from "../../../src/api/Api.ts"
import { CreateForkRequest } from "../../../src/domain/Fork.ts"
import { CreateGuardrailRequest } from "../../../src/domain/Guardrail.ts"
import {
  createGuardrailBody,
  installedTypesOf,
  newGuardrailDraft,
  PARAMS_TEMPLATE,
  POLICY_TYPES,
  updateGuardrailBody
} from "../../../src/ui/app/pages/enforcement/guardrailDraft.ts"
import { forkRequest, initialDraft, mockCandidates } from "../../../src/ui/app/pages/forks/forkDraft.ts"

const T = "7d0f3c59-0000-4000-8000-000000000001"
const S = "7d0f3c59-0000-4000-8000-000000000002"

describe("fork draft", () => {
  test("a string input stays text; a structured one is edited as JSON", () => {
    expect(
      initialDraft({ id: S, parent_id: null, span_type: "llm_call", name: "plan", input: "Book Lisbon" })
    ).toMatchObject({
      inputText: "Book Lisbon",
      inputIsJson: false
    })
    const messages = [{ role: "user", content: "hi" }]
    const draft = initialDraft({ id: S, parent_id: null, span_type: "llm_call", name: "plan", input: messages })
    expect(draft.inputIsJson).toBe(true)
    expect(Either.getOrThrow(forkRequest(T, S, draft)).modified_input).toEqual(messages)
  })

  test("any draft that builds is a request the contract accepts", () => {
    fc.assert(
      fc.property(
        fc.jsonValue(),
        fc.string({ maxLength: 600 }),
        fc.dictionary(fc.string({ minLength: 1 }), fc.jsonValue()),
        (input, name, mocks) => {
          const draft = {
            name,
            inputText: JSON.stringify(input),
            inputIsJson: true,
            mocks: Object.fromEntries(Object.entries(mocks).map(([k, v]) => [k, JSON.stringify(v)]))
          }
          const built = forkRequest(T, S, draft)
          if (name.trim().length > 500) return expect(Either.isLeft(built)).toBe(true)
          const body = Either.getOrThrow(built)
          expect(Either.isRight(Schema.decodeUnknownEither(CreateForkRequest)(body))).toBe(true)
          expect(body.modified_input).toEqual(JSON.parse(JSON.stringify(input)))
        }
      )
    )
  })

  test("invalid JSON is named, not sent", () => {
    const bad = forkRequest(T, S, { name: "", inputText: "{", inputIsJson: true, mocks: {} })
    expect(Either.isLeft(bad) && bad.left).toContain("The modified input is not valid JSON")
    const badMock = forkRequest(T, S, {
      name: "",
      inputText: "x",
      inputIsJson: false,
      mocks: { web_search: "not json" }
    })
    expect(Either.isLeft(badMock) && badMock.left).toContain("'web_search'")
  })

  test("mockable tools: tool spans from the fork point on, once per name, with the recorded output", () => {
    const spans = [
      { id: "a", parent_id: null, span_type: "tool_call", name: "early", output: 1 },
      { id: "b", parent_id: null, span_type: "llm_call", name: "plan" },
      { id: "c", parent_id: "b", span_type: "tool_call", name: "search", output: { r: [1] } },
      { id: "d", parent_id: "b", span_type: "tool_result", name: "search", output: 2 }
    ]
    expect(mockCandidates(spans, undefined, "b")).toEqual([
      { tool: "search", recorded: JSON.stringify({ r: [1] }, null, 2) }
    ])
    expect(mockCandidates(spans, undefined, "zzz")).toEqual([])
  })
})

describe("guardrail draft", () => {
  test("every type's template is a valid policy", () => {
    for (const type of POLICY_TYPES) {
      const body = createGuardrailBody(newGuardrailDraft(type))
      expect(Either.isRight(body)).toBe(true)
      expect(Either.isRight(Schema.decodeUnknownEither(CreateGuardrailRequest)(Either.getOrThrow(body)))).toBe(true)
      expect(Either.getOrThrow(body).params as unknown).toEqual(PARAMS_TEMPLATE[type])
    }
  })

  test("wrong parameters are explained with their path before anything is sent", () => {
    const wrong = createGuardrailBody({ ...newGuardrailDraft("budget_usd"), paramsText: '{"max_usd": -1}' })
    expect(Either.isLeft(wrong) && wrong.left).toContain("max_usd")
    const extra = createGuardrailBody({ ...newGuardrailDraft("max_steps"), paramsText: '{"max_steps": 3, "oops": 1}' })
    expect(Either.isLeft(extra)).toBe(true)
    const notJson = createGuardrailBody({ ...newGuardrailDraft("rate"), paramsText: "{" })
    expect(Either.isLeft(notJson) && notJson.left).toContain("not valid JSON")
  })

  test("an edit sends name (null when cleared), enabled and params", () => {
    const body = Either.getOrThrow(
      updateGuardrailBody({ ...newGuardrailDraft("max_steps"), name: " ", enabled: false })
    )
    expect(body).toEqual({ name: null, enabled: false, params: { max_steps: 50 } })
  })
})

describe("guardrail types installed by extensions", () => {
  const spec = OpenApi.fromApi(
    apiWithGuardrailTypes([
      {
        type: "tool_quota",
        description: "A quota",
        params: Schema.Struct({ tool: Schema.String, max_per_day: Schema.Int }),
        example: { tool: "send_email", max_per_day: 100 }
      },
      { type: "no_example", description: "Without an example", params: Schema.Struct({}) }
    ])
  )

  test("are read from the server's OpenAPI document, with their example params as the template", () => {
    expect(installedTypesOf(spec)).toEqual([
      { type: "tool_quota", example: { tool: "send_email", max_per_day: 100 } },
      { type: "no_example" }
    ])
    expect(installedTypesOf(OpenApi.fromApi(apiWithGuardrailTypes([])))).toEqual([])
    expect(installedTypesOf(undefined)).toEqual([])
    expect(newGuardrailDraft("tool_quota", { tool: "x", max_per_day: 1 }).paramsText).toContain('"max_per_day": 1')
    expect(newGuardrailDraft("no_example").paramsText).toBe("{}")
  })

  test("their params are sent as a JSON object, checked by the server", () => {
    const body = createGuardrailBody({
      ...newGuardrailDraft("tool_quota"),
      paramsText: '{"tool": "x", "max_per_day": 2}'
    })
    expect(Either.getOrThrow(body) as unknown).toEqual({
      type: "tool_quota",
      params: { tool: "x", max_per_day: 2 },
      enabled: true
    })
    const notObject = createGuardrailBody({ ...newGuardrailDraft("tool_quota"), paramsText: "[1]" })
    expect(Either.isLeft(notObject) && notObject.left).toContain("JSON object")
  })
})
