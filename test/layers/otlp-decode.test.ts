import { describe, expect, test } from "bun:test"
import { Either, FastCheck as fc } from "effect"
import { deflateRawSync, deflateSync, gzipSync } from "node:zlib"
import { decompress } from "#layers/ingest/Decompress"
import {
  decodeOtlpJson,
  decodeOtlpProtobuf,
  MAX_ANY_VALUE_DEPTH,
  otlpProtoRoot,
  TOO_DEEP
} from "#layers/ingest/OtlpDecode"
import type { DecodedExport, OtlpSpan } from "#src/domain/Otlp"
import { protobufBody } from "../support/Otlp.ts"

const Request = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")

const TRACE = "5b8efff798038103d269b633813fc60c"
const SPAN = "eee19b7ec3c1b174"
const PARENT = "00f067aa0ba902b7"
const T0 = "1787220000000000000"

const right = (either: Either.Either<DecodedExport, string>) => {
  if (Either.isLeft(either)) throw new Error(`expected Right, got Left: ${either.left}`)
  return either.right
}
const json = (body: unknown) => right(decodeOtlpJson(body))
const only = (decoded: DecodedExport): OtlpSpan => {
  expect(decoded.rejected).toEqual([])
  expect(decoded.spans).toHaveLength(1)
  return decoded.spans[0]!
}

/** An export of these spans under one resource and scope. */
const exportOf = (...spans: ReadonlyArray<unknown>) => ({
  resourceSpans: [
    {
      resource: { attributes: [{ key: "service.name", value: { stringValue: "agent" } }] },
      scopeSpans: [{ scope: { name: "openai", version: "1.2.3" }, spans }]
    }
  ]
})
const spanWith = (fields: Record<string, unknown>) => ({ traceId: TRACE, spanId: SPAN, name: "chat", ...fields })
const attrs = (...pairs: ReadonlyArray<readonly [string, unknown]>) => pairs.map(([key, value]) => ({ key, value }))
const attributesOf = (...pairs: ReadonlyArray<readonly [string, unknown]>) =>
  only(json(exportOf(spanWith({ attributes: attrs(...pairs) })))).attributes

/** One span exercising every field and every AnyValue kind. */
const richSpan = {
  traceId: TRACE,
  spanId: SPAN,
  parentSpanId: PARENT,
  traceState: "vendor=1",
  flags: 0x301,
  name: "chat gpt-4o",
  kind: 3,
  startTimeUnixNano: T0,
  endTimeUnixNano: "18446744073709551615",
  attributes: attrs(
    ["s", { stringValue: "héllo ✓ \u{1F600}" }],
    ["empty", { stringValue: "" }],
    ["b", { boolValue: false }],
    ["i", { intValue: "-412" }],
    ["big", { intValue: "9007199254740993" }],
    ["min", { intValue: "-9223372036854775808" }],
    ["d", { doubleValue: 0.25 }],
    ["nan", { doubleValue: "NaN" }],
    ["inf", { doubleValue: "-Infinity" }],
    ["bytes", { bytesValue: "AQID/w==" }],
    ["arr", { arrayValue: { values: [{ intValue: "1" }, { stringValue: "two" }, {}, { arrayValue: {} }] } }],
    [
      "kv",
      { kvlistValue: { values: attrs(["inner", { kvlistValue: { values: attrs(["deep", { boolValue: true }]) } }]) } }
    ],
    ["none", {}],
    ["dup", { stringValue: "first" }],
    ["dup", { stringValue: "last" }]
  ),
  events: [
    { timeUnixNano: "1787220000500000000", name: "gen_ai.choice", attributes: attrs(["index", { intValue: "0" }]) },
    { name: "no time" }
  ],
  status: { code: 2, message: "boom" }
}

describe("decodeOtlpJson", () => {
  test("decodes a span with its resource and scope; ids lowercase hex, times as decimal strings", () => {
    const span = only(
      json(
        exportOf(
          spanWith({
            traceId: "5B8EFFF798038103D269B633813FC60C",
            spanId: "EEE19b7ec3C1B174",
            parentSpanId: "00F067AA0BA902B7",
            kind: 2,
            startTimeUnixNano: T0,
            endTimeUnixNano: "1787220001000000000",
            traceState: "a=b",
            flags: 1,
            status: { code: 1, message: "fine" }
          })
        )
      )
    )
    expect(span).toEqual({
      traceId: TRACE,
      spanId: SPAN,
      parentSpanId: PARENT,
      name: "chat",
      kind: 2,
      startTimeUnixNano: T0,
      endTimeUnixNano: "1787220001000000000",
      attributes: {},
      events: [],
      status: { code: 1, message: "fine" },
      flags: 1,
      traceState: "a=b",
      resource: { "service.name": "agent" },
      scope: { name: "openai", version: "1.2.3", attributes: {} },
      idEncoding: "hex"
    })
  })

  test("absent fields take their defaults", () => {
    const span = only(json({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: SPAN }] }] }] }))
    expect(span).toEqual({
      traceId: TRACE,
      spanId: SPAN,
      parentSpanId: null,
      name: "",
      kind: 0,
      startTimeUnixNano: "0",
      endTimeUnixNano: "0",
      attributes: {},
      events: [],
      status: { code: 0, message: "" },
      flags: 0,
      traceState: "",
      resource: {},
      scope: { name: "", version: "", attributes: {} },
      idEncoding: "hex"
    })
  })

  test("accepts base64 ids leniently (24/12 characters), converts them to hex and says so", () => {
    const b64 = (hex: string) => Buffer.from(hex, "hex").toString("base64")
    expect(b64(TRACE)).toHaveLength(24)
    expect(b64(SPAN)).toHaveLength(12)
    const span = only(json(exportOf(spanWith({ traceId: b64(TRACE), spanId: b64(SPAN), parentSpanId: b64(PARENT) }))))
    expect(span).toMatchObject({ traceId: TRACE, spanId: SPAN, parentSpanId: PARENT, idEncoding: "base64" })
    const mixed = only(json(exportOf(spanWith({ parentSpanId: b64(PARENT) }))))
    expect(mixed).toMatchObject({ traceId: TRACE, parentSpanId: PARENT, idEncoding: "base64" })
  })

  test("int64 fields as strings or numbers", () => {
    const span = only(
      json(
        exportOf(
          spanWith({
            startTimeUnixNano: 1787220000000000000,
            endTimeUnixNano: "0001787220001000000000",
            events: [{ timeUnixNano: 1700000000123456 }],
            attributes: attrs(
              ["str", { intValue: "412" }],
              ["num", { intValue: 412 }],
              ["neg", { intValue: "-7" }],
              ["unsafe string", { intValue: "9007199254740993" }],
              ["unsafe number", { intValue: 2 ** 60 }],
              ["fraction", { intValue: 1.5 }],
              ["text", { intValue: "12abc" }]
            )
          })
        )
      )
    )
    expect(span.startTimeUnixNano).toBe(T0)
    expect(span.endTimeUnixNano).toBe("1787220001000000000")
    expect(span.events[0]!.timeUnixNano).toBe("1700000000123456")
    expect(span.attributes).toEqual({
      str: 412,
      num: 412,
      neg: -7,
      "unsafe string": "9007199254740993",
      "unsafe number": "1152921504606846976",
      fraction: null,
      text: null
    })
  })

  test('times that are not unsigned 64-bit integers become "0"', () => {
    for (const bad of [
      "-1",
      "1.5",
      "1e18",
      "18446744073709551616",
      "123456789012345678901",
      " 1",
      "",
      null,
      true,
      -5,
      1.5,
      {}
    ]) {
      expect(only(json(exportOf(spanWith({ startTimeUnixNano: bad })))).startTimeUnixNano).toBe("0")
    }
    expect(only(json(exportOf(spanWith({ startTimeUnixNano: "18446744073709551615" })))).startTimeUnixNano).toBe(
      "18446744073709551615"
    )
  })

  test("enums as integers, and leniently as names", () => {
    const decode = (kind: unknown, code: unknown) => {
      const span = only(json(exportOf(spanWith({ kind, status: { code } }))))
      return [span.kind, span.status.code]
    }
    expect(decode(3, 2)).toEqual([3, 2])
    expect(decode("SPAN_KIND_CLIENT", "STATUS_CODE_ERROR")).toEqual([3, 2])
    expect(decode("SPAN_KIND_CONSUMER", "STATUS_CODE_OK")).toEqual([5, 1])
    expect(decode("2", "1")).toEqual([2, 1])
    expect(decode("CLIENT", "constructor")).toEqual([0, 0])
    expect(decode(-1, 1.5)).toEqual([0, 0])
  })

  test("unknown fields are ignored at every level", () => {
    const plain = json(exportOf(spanWith({ attributes: attrs(["a", { stringValue: "x" }]) })))
    const noisy = json({
      extra: 1,
      resourceSpans: [
        {
          schemaUrl: "https://opentelemetry.io/schemas/1.30.0",
          future: { nested: true },
          resource: {
            attributes: [{ key: "service.name", value: { stringValue: "agent" }, x: 1 }],
            droppedAttributesCount: 3
          },
          scopeSpans: [
            {
              scope: { name: "openai", version: "1.2.3", droppedAttributesCount: 0, y: [] },
              schemaUrl: "",
              spans: [
                {
                  ...spanWith({ attributes: [{ key: "a", value: { stringValue: "x", unknownValue: 9 } }] }),
                  links: [{ traceId: TRACE, spanId: SPAN }],
                  droppedEventsCount: 2,
                  trace_id: "snake_case is not OTLP/JSON",
                  somethingNew: { a: 1 }
                }
              ]
            }
          ]
        }
      ]
    })
    expect(noisy).toEqual(plain)
  })

  test("missing, null and empty parentSpanId all mean a root span", () => {
    for (const parent of [undefined, null, ""]) {
      const span = only(json(exportOf(spanWith(parent === undefined ? {} : { parentSpanId: parent }))))
      expect(span.parentSpanId).toBeNull()
    }
  })

  test("a span with bad ids is rejected with a reason; the others still land, in document order", () => {
    const decoded = json(
      exportOf(
        spanWith({ name: "a", spanId: "0000000000000001" }),
        spanWith({ name: "zero trace", traceId: "0".repeat(32) }),
        spanWith({ name: "short trace", traceId: TRACE.slice(2) }),
        spanWith({ name: "not hex", traceId: "g".repeat(32) }),
        spanWith({ name: "empty span id", spanId: "" }),
        spanWith({ name: "zero span id", spanId: "0".repeat(16) }),
        spanWith({ name: "numeric span id", spanId: 1234567890123456 }),
        spanWith({ name: "zero parent", parentSpanId: "0".repeat(16) }),
        spanWith({ name: "long parent", parentSpanId: PARENT + "00" }),
        null,
        "span",
        spanWith({ name: "b", spanId: "0000000000000002", parentSpanId: "0000000000000001" })
      )
    )
    expect(decoded.spans.map((s) => [s.name, s.spanId, s.parentSpanId])).toEqual([
      ["a", "0000000000000001", null],
      ["b", "0000000000000002", "0000000000000001"]
    ])
    expect(decoded.rejected.map((r) => r.reason.split(":")[0])).toEqual([
      "invalid traceId",
      "invalid traceId",
      "invalid traceId",
      "invalid spanId",
      "invalid spanId",
      "invalid spanId",
      "invalid parentSpanId",
      "invalid parentSpanId",
      "span is not an object",
      "span is not an object"
    ])
  })

  test("flattens resourceSpans → scopeSpans → spans, each span carrying its own resource and scope", () => {
    const id = (n: number) => n.toString(16).padStart(16, "0")
    const decoded = json({
      resourceSpans: [
        {
          resource: { attributes: attrs(["service.name", { stringValue: "one" }]) },
          scopeSpans: [
            { scope: { name: "s1" }, spans: [spanWith({ spanId: id(1) }), spanWith({ spanId: id(2) })] },
            { scope: { name: "s2", attributes: attrs(["k", { intValue: "1" }]) }, spans: [spanWith({ spanId: id(3) })] }
          ]
        },
        { scopeSpans: [{ spans: [spanWith({ spanId: id(4) })] }] }
      ]
    })
    expect(decoded.spans.map((s) => [s.spanId, s.resource, s.scope])).toEqual([
      [id(1), { "service.name": "one" }, { name: "s1", version: "", attributes: {} }],
      [id(2), { "service.name": "one" }, { name: "s1", version: "", attributes: {} }],
      [id(3), { "service.name": "one" }, { name: "s2", version: "", attributes: { k: 1 } }],
      [id(4), {}, { name: "", version: "", attributes: {} }]
    ])
  })

  test("AnyValues: nested arrays and kvlists, bytes as base64, doubles, {} as null", () => {
    expect(
      attributesOf(
        ["s", { stringValue: "x" }],
        ["b", { boolValue: true }],
        ["d", { doubleValue: 1.5 }],
        ["d as string", { doubleValue: "2.5" }],
        ["nan", { doubleValue: "NaN" }],
        ["inf", { doubleValue: "Infinity" }],
        ["bad double", { doubleValue: "fast" }],
        ["bytes", { bytesValue: "AQID" }],
        ["empty", {}],
        ["nulls", { stringValue: null, boolValue: false }],
        [
          "array",
          { arrayValue: { values: [{ intValue: "1" }, { arrayValue: { values: [{ stringValue: "in" }] } }, {}] } }
        ],
        ["empty array", { arrayValue: {} }],
        [
          "kvlist",
          {
            kvlistValue: {
              values: [
                { key: "role", value: { stringValue: "user" } },
                {
                  key: "parts",
                  value: {
                    arrayValue: {
                      values: [{ kvlistValue: { values: [{ key: "type", value: { stringValue: "text" } }] } }]
                    }
                  }
                }
              ]
            }
          }
        ],
        ["wrong types", { stringValue: 5 }],
        ["not an AnyValue", "plain"]
      )
    ).toEqual({
      s: "x",
      b: true,
      d: 1.5,
      "d as string": 2.5,
      nan: "NaN",
      inf: "Infinity",
      "bad double": null,
      bytes: "AQID",
      empty: null,
      nulls: false,
      array: [1, ["in"], null],
      "empty array": [],
      kvlist: { role: "user", parts: [{ type: "text" }] },
      "wrong types": null,
      "not an AnyValue": null
    })
  })

  test("a repeated key keeps its last value, in attributes and in kvlists", () => {
    expect(
      attributesOf(
        ["k", { stringValue: "first" }],
        ["other", { intValue: "1" }],
        ["k", { stringValue: "last" }],
        ["kv", { kvlistValue: { values: attrs(["x", { intValue: "1" }], ["x", { intValue: "2" }]) } }]
      )
    ).toEqual({ k: "last", other: 1, kv: { x: 2 } })
  })

  test('"__proto__" is an ordinary key; keyless entries are skipped, an absent key is the empty one', () => {
    const attributes = only(
      json(
        JSON.parse(
          JSON.stringify(
            exportOf(
              spanWith({
                attributes: [
                  { key: "__proto__", value: { stringValue: "polluted?" } },
                  { value: { stringValue: "no key" } },
                  { key: 7, value: { stringValue: "numeric key" } },
                  { key: "constructor", value: { intValue: "1" } }
                ]
              })
            )
          )
        )
      )
    ).attributes
    expect(Object.getPrototypeOf(attributes)).toBe(Object.prototype)
    expect(Object.keys(attributes)).toEqual(["__proto__", "", "constructor"])
    expect(attributes["__proto__"]).toBe("polluted?")
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  test(`AnyValues nested deeper than ${MAX_ANY_VALUE_DEPTH} levels become a placeholder`, () => {
    let value: unknown = { stringValue: "bottom" }
    for (let i = 0; i < 500; i++) value = { arrayValue: { values: [value] } }
    let decoded = attributesOf(["deep", value]).deep
    let depth = 1
    while (Array.isArray(decoded)) {
      decoded = decoded[0]
      depth++
    }
    expect(decoded).toBe(TOO_DEEP)
    expect(depth).toBe(MAX_ANY_VALUE_DEPTH + 1)
  })

  test("events: name, time and attributes; non-objects skipped", () => {
    const span = only(
      json(
        exportOf(
          spanWith({
            events: [
              {
                name: "gen_ai.user.message",
                timeUnixNano: "1787220000100000000",
                attributes: attrs(["content", { stringValue: "hi" }])
              },
              null,
              { name: 5 }
            ]
          })
        )
      )
    )
    expect(span.events).toEqual([
      { name: "gen_ai.user.message", timeUnixNano: "1787220000100000000", attributes: { content: "hi" } },
      { name: "", timeUnixNano: "0", attributes: {} }
    ])
  })

  test("Left only without a resourceSpans array; hostile containers simply hold no spans", () => {
    for (const body of [null, 1, "x", [], {}, { resourceSpans: {} }, { resourceSpans: "x" }, { resourceSpans: null }]) {
      expect(Either.isLeft(decodeOtlpJson(body))).toBe(true)
    }
    expect(json({ resourceSpans: [] })).toEqual({ spans: [], rejected: [] })
    expect(
      json({
        resourceSpans: [
          null,
          1,
          [],
          { scopeSpans: "x" },
          { resource: 5, scopeSpans: [null, { scope: [], spans: {} }, { spans: null }] }
        ]
      })
    ).toEqual({ spans: [], rejected: [] })
  })

  test("hostile values anywhere never throw", () => {
    const hostile = fc.oneof(
      fc.jsonValue(),
      fc.constantFrom(
        null,
        -1,
        1.5,
        1e300,
        "",
        "__proto__",
        "NaN",
        [],
        {},
        [[[]]],
        { stringValue: {} },
        { arrayValue: [] }
      )
    )
    const leaf = fc.oneof(hostile, fc.constantFrom(TRACE, SPAN, PARENT, T0, 3, "SPAN_KIND_CLIENT"))
    const keyValue = fc.oneof(hostile, fc.record({ key: fc.oneof(fc.string(), hostile), value: hostile }))
    const hostileSpan = fc.oneof(
      hostile,
      fc.record(
        {
          traceId: leaf,
          spanId: leaf,
          parentSpanId: leaf,
          name: leaf,
          kind: leaf,
          flags: leaf,
          startTimeUnixNano: leaf,
          endTimeUnixNano: leaf,
          status: fc.oneof(hostile, fc.record({ code: leaf, message: leaf })),
          attributes: fc.oneof(hostile, fc.array(keyValue)),
          events: fc.oneof(hostile, fc.array(hostile))
        },
        { requiredKeys: [] }
      )
    )
    const hostileExport = fc.record({
      resourceSpans: fc.array(
        fc.oneof(
          hostile,
          fc.record(
            {
              resource: fc.oneof(hostile, fc.record({ attributes: fc.oneof(hostile, fc.array(keyValue)) })),
              scopeSpans: fc.oneof(
                hostile,
                fc.array(
                  fc.oneof(hostile, fc.record({ scope: hostile, spans: fc.oneof(hostile, fc.array(hostileSpan)) }))
                )
              )
            },
            { requiredKeys: [] }
          )
        )
      )
    })
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc.json().map((text) => JSON.parse(text)),
          hostileExport
        ),
        (body) => {
          const decoded = decodeOtlpJson(body)
          if (Either.isRight(decoded)) JSON.stringify(decoded.right)
        }
      ),
      { numRuns: 1500 }
    )
  })
})

describe("decodeOtlpProtobuf", () => {
  test("gives the same DecodedExport as decodeOtlpJson of the equivalent JSON", () => {
    const body = {
      resourceSpans: [
        {
          resource: { attributes: attrs(["service.name", { stringValue: "agent" }], ["pid", { intValue: "4242" }]) },
          scopeSpans: [
            {
              scope: { name: "openai", version: "1.2.3", attributes: attrs(["x", { boolValue: true }]) },
              spans: [
                richSpan,
                spanWith({ spanId: "0000000000000009", kind: "SPAN_KIND_SERVER", status: { code: "STATUS_CODE_OK" } }),
                spanWith({ spanId: "0000000000000000" }),
                spanWith({ traceId: TRACE.slice(4), spanId: "000000000000000a" })
              ]
            },
            { spans: [] }
          ]
        },
        { scopeSpans: [{ spans: [spanWith({ spanId: "000000000000000b", parentSpanId: "" })] }] }
      ]
    }
    const fromJson = json(body)
    expect(fromJson.spans).toHaveLength(3)
    expect(fromJson.rejected).toHaveLength(2)
    expect(right(decodeOtlpProtobuf(protobufBody(body)))).toEqual(fromJson)
  })

  test("the rich span decodes to exactly these values", () => {
    const span = only(right(decodeOtlpProtobuf(protobufBody(exportOf(richSpan)))))
    expect(span).toMatchObject({
      parentSpanId: PARENT,
      flags: 0x301,
      kind: 3,
      traceState: "vendor=1",
      startTimeUnixNano: T0,
      endTimeUnixNano: "18446744073709551615",
      status: { code: 2, message: "boom" },
      events: [
        { name: "gen_ai.choice", timeUnixNano: "1787220000500000000", attributes: { index: 0 } },
        { name: "no time", timeUnixNano: "0", attributes: {} }
      ]
    })
    expect(span.attributes).toEqual({
      s: "héllo ✓ \u{1F600}",
      empty: "",
      b: false,
      i: -412,
      big: "9007199254740993",
      min: "-9223372036854775808",
      d: 0.25,
      nan: "NaN",
      inf: "-Infinity",
      bytes: "AQID/w==",
      arr: [1, "two", null, []],
      kv: { inner: { deep: true } },
      none: null,
      dup: "last"
    })
  })

  test("64-bit integers convert exactly, the same as their JSON decimal strings", () => {
    fc.assert(
      fc.property(
        fc.bigUint({ max: 2n ** 64n - 1n }),
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        (time, int) => {
          const body = exportOf(
            spanWith({ startTimeUnixNano: time.toString(), attributes: attrs(["n", { intValue: int.toString() }]) })
          )
          const span = only(right(decodeOtlpProtobuf(protobufBody(body))))
          expect(span.startTimeUnixNano).toBe(time.toString())
          const n = span.attributes.n
          expect(typeof n === "number" ? BigInt(n) : BigInt(n as string)).toBe(int)
          expect(span).toEqual(only(json(body)))
        }
      ),
      { numRuns: 300 }
    )
  })

  test("ids of the wrong length are rejected like in JSON", () => {
    const message = Request.fromObject({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                { traceId: Buffer.from(TRACE, "hex"), spanId: Buffer.from(SPAN, "hex"), name: "ok" },
                { traceId: Buffer.alloc(15, 1), spanId: Buffer.from(SPAN, "hex") },
                { traceId: Buffer.from(TRACE, "hex"), spanId: Buffer.alloc(8) },
                {
                  traceId: Buffer.from(TRACE, "hex"),
                  spanId: Buffer.from(SPAN, "hex"),
                  parentSpanId: Buffer.alloc(4, 1)
                },
                { spanId: Buffer.from(SPAN, "hex") }
              ]
            }
          ]
        }
      ]
    })
    const decoded = right(decodeOtlpProtobuf(Request.encode(message).finish()))
    expect(decoded.spans.map((s) => s.name)).toEqual(["ok"])
    expect(decoded.rejected.map((r) => r.reason.split(":")[0])).toEqual([
      "invalid traceId",
      "invalid spanId",
      "invalid parentSpanId",
      "invalid traceId"
    ])
  })

  test("an empty body is an empty export", () => {
    expect(right(decodeOtlpProtobuf(new Uint8Array()))).toEqual({ spans: [], rejected: [] })
  })

  test("truncated, garbage, invalid UTF-8 and over-deep bodies are Left", () => {
    const valid = protobufBody(exportOf(richSpan))
    for (const cut of [1, 7, Math.floor(valid.length / 2), valid.length - 1]) {
      expect(Either.isLeft(decodeOtlpProtobuf(valid.subarray(0, cut)))).toBe(true)
    }
    expect(Either.isLeft(decodeOtlpProtobuf(new Uint8Array([0x0a, 0xff, 0xff, 0xff])))).toBe(true)
    expect(Either.isLeft(decodeOtlpProtobuf(new Uint8Array(64).fill(0xff)))).toBe(true)
    expect(Either.isLeft(decodeOtlpProtobuf(new TextEncoder().encode('{"resourceSpans": []}')))).toBe(true)

    const badUtf8 = Buffer.from(protobufBody(exportOf(spanWith({ name: "AAAA" }))))
    badUtf8.set([0xc3, 0x28], badUtf8.indexOf("AAAA"))
    expect(Either.isLeft(decodeOtlpProtobuf(badUtf8))).toBe(true)

    // protobufjs will not encode this depth either, so the nesting is written by hand
    const varint = (n: number): Array<number> => (n < 128 ? [n] : [(n & 127) | 128, ...varint(n >>> 7)])
    const field = (tag: number, bytes: ReadonlyArray<number>) => [tag, ...varint(bytes.length), ...bytes]
    let anyValue = field(0x0a, [0x78])
    for (let i = 0; i < 200; i++) anyValue = field(0x2a, field(0x0a, anyValue))
    const keyValue = [...field(0x0a, [...Buffer.from("deep")]), ...field(0x12, anyValue)]
    const span = [
      ...otlpProtoRoot
        .lookupType("opentelemetry.proto.trace.v1.Span")
        .encode({ traceId: Buffer.from(TRACE, "hex"), spanId: Buffer.from(SPAN, "hex") })
        .finish(),
      ...field(0x4a, keyValue)
    ]
    const deep = decodeOtlpProtobuf(new Uint8Array(field(0x0a, field(0x12, field(0x12, span)))))
    expect(Either.isLeft(deep) && deep.left).toContain("depth")
  })

  test("arbitrary bytes never throw", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), (bytes) => {
        decodeOtlpProtobuf(bytes)
      }),
      { numRuns: 2000 }
    )
  })
})

describe("decompress", () => {
  const body = new TextEncoder().encode(JSON.stringify(exportOf(richSpan)).repeat(20))
  const MB = 1024 * 1024

  const ok = (either: ReturnType<typeof decompress>) => {
    if (Either.isLeft(either)) throw new Error(`expected Right, got ${either.left.reason}: ${either.left.message}`)
    return either.right
  }
  const reason = (either: ReturnType<typeof decompress>) => (Either.isLeft(either) ? either.left.reason : "ok")

  test("identity, gzip, x-gzip and deflate (zlib-wrapped and raw) round trips", () => {
    for (const encoding of [undefined, "", "identity", "Identity"])
      expect(ok(decompress(body, encoding, MB))).toEqual(body)
    for (const encoding of ["gzip", "x-gzip", "GZIP", " gzip "])
      expect(ok(decompress(gzipSync(body), encoding, MB))).toEqual(body)
    expect(ok(decompress(deflateSync(body), "deflate", MB))).toEqual(body)
    expect(ok(decompress(deflateRawSync(body), "deflate", MB))).toEqual(body)
    expect(ok(decompress(Buffer.concat([gzipSync(body), gzipSync(body)]), "gzip", MB))).toEqual(
      new Uint8Array([...body, ...body])
    )
  })

  test("output up to maxBytes passes, one byte more is too_large, for every encoding", () => {
    const exact = body.length
    expect(ok(decompress(gzipSync(body), "gzip", exact))).toHaveLength(exact)
    expect(reason(decompress(gzipSync(body), "gzip", exact - 1))).toBe("too_large")
    expect(reason(decompress(deflateSync(body), "deflate", exact - 1))).toBe("too_large")
    expect(reason(decompress(deflateRawSync(body), "deflate", exact - 1))).toBe("too_large")
    expect(reason(decompress(body, undefined, exact - 1))).toBe("too_large")
    expect(reason(decompress(gzipSync(body), "gzip", 0))).toBe("too_large")
  })

  test("a 200 MB gzip bomb is refused quickly, without inflating it in memory", () => {
    // 200 gzip members of 1 MiB of zeros each: about 200 KB that inflate to 200 MiB.
    const member = gzipSync(new Uint8Array(MB), { level: 9 })
    const bomb = Buffer.concat(Array.from({ length: 200 }, () => member))
    expect(bomb.length).toBeLessThan(300_000)
    const before = process.memoryUsage().rss
    const started = performance.now()
    const result = decompress(bomb, "gzip", 4 * MB)
    const elapsed = performance.now() - started
    const grown = process.memoryUsage().rss - before
    expect(reason(result)).toBe("too_large")
    expect(elapsed).toBeLessThan(1000)
    expect(grown).toBeLessThan(64 * MB)

    const deflateBomb = deflateSync(new Uint8Array(64 * MB), { level: 9 })
    expect(reason(decompress(deflateBomb, "deflate", MB))).toBe("too_large")
  })

  test("unsupported encodings and corrupt data are refused with their reason", () => {
    for (const encoding of ["br", "zstd", "compress", "gzip, br", "gzip, gzip"]) {
      const refused = decompress(gzipSync(body), encoding, MB)
      expect(reason(refused)).toBe("unsupported_encoding")
      expect(Either.isLeft(refused) && refused.left.message).toContain(encoding)
    }
    expect(ok(decompress(gzipSync(body), "identity, gzip", MB))).toEqual(body)
    const gz = gzipSync(body)
    expect(reason(decompress(body, "gzip", MB))).toBe("corrupt")
    expect(reason(decompress(gz.subarray(0, gz.length - 10), "gzip", MB))).toBe("corrupt")
    expect(reason(decompress(new Uint8Array(), "gzip", MB))).toBe("corrupt")
    expect(reason(decompress(new Uint8Array([1, 2, 3, 4, 5]), "deflate", MB))).toBe("corrupt")
    const flipped = Buffer.from(gz)
    flipped[flipped.length - 6] = flipped[flipped.length - 6]! ^ 0xff
    expect(reason(decompress(flipped, "gzip", MB))).toBe("corrupt")
  })
})
