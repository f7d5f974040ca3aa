import { Either, ParseResult, Schema } from "effect"
import {
  CreateGuardrailRequest,
  type CreateGuardrailRequest as CreateGuardrailRequestType,
  isBuiltInPolicyType,
  POLICY_TYPES,
  type PolicyType,
  UpdateGuardrailRequest
} from "../../../../domain/Guardrail.ts"

/** A starting point for each policy type's parameters, shown in the editor when the type is picked. */
export const PARAMS_TEMPLATE: Readonly<Record<PolicyType, unknown>> = {
  budget_usd: { max_usd: 5 },
  token_budget: { max_tokens: 100000 },
  max_steps: { max_steps: 50 },
  tool_denylist: { patterns: ["shell_*"] },
  tool_allowlist: { patterns: ["web_search", "read_*"] },
  model_allowlist: { patterns: ["gpt-4o*"] },
  loop_breaker: { max_repeats: 3, window_steps: 20 },
  rate: { max_calls: 60, window_seconds: 60 },
  require_approval: { tool_patterns: ["send_*"], approval_scope: "once" }
}

export { isBuiltInPolicyType, POLICY_TYPES, type PolicyType }

/** A guardrail type an extension installed on the server, as its OpenAPI document shows it. */
export interface InstalledType {
  readonly type: string
  /** Example params, if the type gave one: the editor's template. */
  readonly example?: unknown
}

/**
 * The installed guardrail types in the server's /openapi.json: the members of POST /api/v1/guardrails' request
 * body whose `type` is not a built-in one (docs/extensions.md, "Guardrail types").
 */
export const installedTypesOf = (spec: unknown): ReadonlyArray<InstalledType> => {
  // biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document, walked defensively
  const doc = spec as any
  const found: Array<InstalledType> = []
  const seen = new Set<unknown>()
  // biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document, walked defensively
  const walk = (node: any): void => {
    if (typeof node !== "object" || node === null || seen.has(node)) return
    seen.add(node)
    if (typeof node.$ref === "string") walk(doc?.components?.schemas?.[node.$ref.split("/").pop()])
    else if (Array.isArray(node.anyOf ?? node.oneOf)) for (const member of node.anyOf ?? node.oneOf) walk(member)
    else {
      const type = node.properties?.type?.enum?.[0]
      if (typeof type === "string" && !isBuiltInPolicyType(type)) {
        const example = node.examples?.[0]?.params
        found.push(example === undefined ? { type } : { type, example })
      }
    }
  }
  walk(doc?.paths?.["/api/v1/guardrails"]?.post?.requestBody?.content?.["application/json"]?.schema)
  return found
}

/** The guardrail editor's fields, as typed. */
export interface GuardrailDraft {
  /** A built-in PolicyType or an installed type. */
  readonly type: string
  readonly name: string
  readonly projectId: string
  readonly enabled: boolean
  readonly paramsText: string
}

export const newGuardrailDraft = (type: string = "budget_usd", template?: unknown): GuardrailDraft => ({
  type,
  name: "",
  projectId: "",
  enabled: true,
  paramsText: JSON.stringify(isBuiltInPolicyType(type) ? PARAMS_TEMPLATE[type] : (template ?? {}), null, 2)
})

const parseParams = (text: string): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch (e) {
    return Either.left(`Parameters are not valid JSON (${e instanceof Error ? e.message : String(e)})`)
  }
}

const explain = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message))
    .join("; ")

/**
 * The body of POST /api/v1/guardrails for a draft, checked against the contract's own schema (so the
 * editor says what is wrong before the server does), or the problem in words.
 */
export const createGuardrailBody = (draft: GuardrailDraft): Either.Either<CreateGuardrailRequestType, string> =>
  Either.gen(function* () {
    const params = yield* parseParams(draft.paramsText)
    const body = {
      type: draft.type,
      params,
      enabled: draft.enabled,
      ...(draft.name.trim() === "" ? {} : { name: draft.name.trim() }),
      ...(draft.projectId.trim() === "" ? {} : { project_id: draft.projectId.trim() })
    }
    // An installed type's params schema is the server's: the editor checks only that they are a JSON object.
    if (!isBuiltInPolicyType(draft.type)) {
      if (typeof params !== "object" || params === null || Array.isArray(params)) {
        return yield* Either.left("Parameters must be a JSON object")
      }
      return body as unknown as CreateGuardrailRequestType
    }
    const decoded = Schema.decodeUnknownEither(CreateGuardrailRequest)(body)
    if (Either.isLeft(decoded)) return yield* Either.left(explain(decoded.left))
    return decoded.right
  })

/** The body of PATCH /api/v1/guardrails/{id} for an edited draft (name, enabled, params; type and project are fixed). */
export const updateGuardrailBody = (
  draft: GuardrailDraft
): Either.Either<typeof UpdateGuardrailRequest.Encoded, string> =>
  Either.gen(function* () {
    const created = yield* createGuardrailBody(draft)
    return {
      name: draft.name.trim() === "" ? null : draft.name.trim(),
      enabled: draft.enabled,
      params: { ...created.params }
    }
  })
