import { HttpApi, OpenApi } from "@effect/platform"
import {
  IngestBackpressureWire,
  InternalWire,
  NotFoundWire,
  RequestTimeoutWire,
  UnavailableWire,
  ValidationFailedWire
} from "./ApiErrors.ts"
import { EnforcementApi } from "./EnforcementApi.ts"
import { type CustomGuardrailType, createGuardrailRequestWith } from "../domain/Guardrail.ts"
import { EvalRulesApi } from "./EvalRulesApi.ts"
import { InsightsApi } from "./InsightsApi.ts"
import { EvaluationsApi } from "./EvaluationsApi.ts"
import { ForksApi } from "./ForksApi.ts"
import { JobsApi } from "./JobsApi.ts"
import { AccountApi } from "./AccountApi.ts"
import { ApiKeysApi } from "./ApiKeysApi.ts"
import { BatchApi } from "./BatchApi.ts"
import { DiscoveryApi } from "./DiscoveryApi.ts"
import { SessionsApi } from "./SessionsApi.ts"
import { UsageApi } from "./UsageApi.ts"
import { RetentionApi } from "./RetentionApi.ts"
import { LangfuseOtlpApi, OtlpApi } from "./OtlpApi.ts"
import { SystemApi } from "./SystemApi.ts"
import { TracesApi } from "./TracesApi.ts"
import { SearchApi } from "./SearchApi.ts"
import { DiagnosticsApi } from "./DiagnosticsApi.ts"

/** The reference's introduction (/docs): what the service is, a first trace, and how to authenticate. */
const INTRODUCTION = `Tapedeck records, inspects, replays and evaluates AI agent executions. A **trace** is one run of an agent;
its **spans** are the steps: model calls, tool calls, reasoning, actions and errors. Send them over this REST API,
the TypeScript SDK (\`@tapedeck/sdk\`) or any OpenTelemetry exporter (\`POST /v1/traces\`); then read, search,
fork and replay them, score them with evaluations, and guard actions before they run.

## Quickstart

Start the server (\`npm install && npx bun run start\`): the first start prints an API key once. Then:

\`\`\`sh
export U=http://localhost:8080 K=svc_…        # the printed key
T=$(node -p 'crypto.randomUUID()')
curl -s $U/api/v1/traces -H "x-service-key: $K" -H 'content-type: application/json' -d '{
  "id": "'$T'", "started_at": "2026-06-01T09:30:00Z", "name": "hello", "status": "completed",
  "spans": [{ "id": "'$(node -p 'crypto.randomUUID()')'", "parent_id": null, "span_type": "llm_call",
    "name": "answer", "model": "gpt-4o-mini", "input_tokens": 12, "output_tokens": 5,
    "started_at": "2026-06-01T09:30:00Z" }]
}'
curl -s $U/api/v1/traces/$T -H "x-service-key: $K"
\`\`\`

The span was sent without a cost: the answer shows one estimated from the model's price, with \`cost_estimated: true\`.
Every operation below has an example body; "Test Request" sends it with your key.

## Authentication

Every route except \`/health\`, \`/openapi.json\`, \`/docs\`, \`/mcp/docs\` and the \`/.well-known/\` documents needs
a credential, in either header:

- \`x-service-key: svc_…\` — an API key (printed at the first start, set with \`TAPEDECK_API_KEYS\`, created with
  \`npx bun run tapedeck keys create --account <name>\` or \`POST /api/v1/api-keys\`);
- \`Authorization: Bearer <API key or JWT>\` — a JWT signed with \`TAPEDECK_JWT_SECRET\` (HS256) whose \`account\` claim names the account.

All data belongs to the credential's account: another account's records answer 404. Errors are always
\`{"error": "…", "code": "…", "retryable": true|false}\`; 429 and 503 carry \`Retry-After\`.

## Beyond this reference

- **Live span stream**: WebSocket \`/ws/v1/stream\` — spans as they are written; authenticate with the header, \`?token=\`
  or a first \`{"type":"auth","token":"…"}\` message, then send \`{"type":"subscribe"}\`.
- **SDK replay socket**: WebSocket \`/ws/v1/replay\` — a connected SDK registers its agents and re-runs forks
  (\`mode: sdk\` replays); the SDK's \`connectReplay\` speaks it for you.
- **MCP**: \`POST /mcp\` (Streamable HTTP) exposes traces, search, forks, evaluations and enforcement as tools;
  \`/mcp/docs\` serves the documentation to assistants.

The repository's \`docs/\` folder covers each of these, the SDK, OpenTelemetry mapping and configuration in full.`

export class TapedeckApi extends HttpApi.make("tapedeck")
  .add(SystemApi)
  .add(TracesApi)
  .add(ForksApi)
  .add(EnforcementApi)
  .add(JobsApi)
  .add(SessionsApi)
  .add(UsageApi)
  .add(RetentionApi)
  .add(BatchApi)
  .add(ApiKeysApi)
  .add(AccountApi)
  .add(DiscoveryApi)
  .add(OtlpApi)
  .add(LangfuseOtlpApi)
  .add(EvaluationsApi)
  .add(EvalRulesApi)
  .add(InsightsApi)
  .add(SearchApi)
  .add(DiagnosticsApi)
  .addError(ValidationFailedWire)
  .addError(NotFoundWire)
  .addError(InternalWire)
  .addError(IngestBackpressureWire)
  .addError(UnavailableWire)
  .addError(RequestTimeoutWire)
  .annotate(OpenApi.Title, "Tapedeck API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, INTRODUCTION) {}

/**
 * The contract with the guardrail types extensions install (docs/extensions.md): POST /api/v1/guardrails takes (and
 * OpenAPI shows) each one's params schema beside the built-in types'. Built once at start from the installed types;
 * without any, `TapedeckApi` itself.
 */
export const apiWithGuardrailTypes = (custom: ReadonlyArray<CustomGuardrailType>): typeof TapedeckApi => {
  if (custom.length === 0) return TapedeckApi
  const group = TapedeckApi.groups.enforcement!
  const create = group.endpoints.createGuardrail as unknown as { setPayload: (schema: unknown) => unknown }
  const endpoint = create.setPayload(createGuardrailRequestWith(custom))
  return TapedeckApi.add(group.add(endpoint as never) as never) as unknown as typeof TapedeckApi
}
