import { Effect, Schema } from "effect"
import { guardrailType } from "tapedeck"

/** `{ tool, max_per_day, hold? }`: at most `max_per_day` allowed calls of `tool` per UTC day, in the whole account. */
export const ToolQuotaParams = Schema.Struct({
  tool: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  max_per_day: Schema.Int.pipe(Schema.between(0, 1_000_000)),
  /** Past the quota, ask a person (a hold) instead of blocking. */
  hold: Schema.optional(Schema.Boolean)
})

const startOfUtcDay = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()))

/**
 * The `tool_quota` guardrail type. The count is the account's allowed checks of the tool since midnight UTC, read
 * from the server's decision log (`allowedCount`): the same on every instance, and it survives restarts.
 */
export const ToolQuotaLive = guardrailType({
  type: "tool_quota",
  description: "At most max_per_day allowed calls of one tool per UTC day, across the account's runs",
  params: ToolQuotaParams,
  example: { tool: "send_email", max_per_day: 100 },
  evaluate: ({ params, request, now, allowedCount }) =>
    Effect.gen(function* () {
      if (request.tool_name !== params.tool) return { verdict: "allow" } as const
      const used = yield* allowedCount({
        tool_name: params.tool,
        since: startOfUtcDay(now),
        at_most: params.max_per_day
      })
      if (used < params.max_per_day) return { verdict: "allow" } as const
      const reason = `tool '${params.tool}' was already called ${used} times today (quota ${params.max_per_day} a day)`
      return params.hold ? ({ verdict: "hold", reason } as const) : ({ verdict: "block", reason } as const)
    })
})
