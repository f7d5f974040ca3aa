import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { ApiKeyList, ApiKeyPath, CreateApiKeyRequest, CreatedApiKey, RevokedApiKey } from "../domain/ApiKey.ts"
import { ConflictWire } from "./ApiErrors.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.get("list", "/api-keys")
      .addSuccess(ApiKeyList)
      .annotate(OpenApi.Summary, "The account's live API keys (prefix, name, created, last used; never the key)")
      .annotate(
        OpenApi.Description,
        "The account's keys that are not revoked, identified by their prefix. The secret part of a key is never shown again after creation."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/api-keys")
      .setPayload(CreateApiKeyRequest)
      .addSuccess(CreatedApiKey)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Create an API key for the account; the full key is in this response only")
      .annotate(
        OpenApi.Description,
        "Creates a key for the caller's account. The response holds the full key (`svc_…`) once: store it now. Send it as `x-service-key` or as `Authorization: Bearer`."
      )
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api-keys/:keyId")
      .setPath(ApiKeyPath)
      .addSuccess(RevokedApiKey)
      .annotate(OpenApi.Summary, "Revoke a key of the account: refused from the next request on, on every instance")
      .annotate(
        OpenApi.Description,
        "Revokes a key of the caller's account: every instance refuses it from the next request on. Another account's key id answers 404."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
