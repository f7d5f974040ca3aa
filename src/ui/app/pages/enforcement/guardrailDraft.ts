import { Either, ParseResult, Schema } from "effect"
import {
  CreateGuardrailRequest,
  type CreateGuardrailRequest as CreateGuardrailRequestType,
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

export { POLICY_TYPES, type PolicyType }

/** The guardrail editor's fields, as typed. */
export interface GuardrailDraft {
  readonly type: PolicyType
  readonly name: string
  readonly projectId: string
  readonly enabled: boolean
  readonly paramsText: string
}

export const newGuardrailDraft = (type: PolicyType = "budget_usd"): GuardrailDraft => ({
  type,
  name: "",
  projectId: "",
  enabled: true,
  paramsText: JSON.stringify(PARAMS_TEMPLATE[type], null, 2)
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
