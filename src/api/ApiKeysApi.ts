import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { ApiKeyList, ApiKeyPath, CreateApiKeyRequest, CreatedApiKey, RevokedApiKey } from "../domain/ApiKey.ts"
import { ConflictWire } from "./ApiErrors.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class ApiKeysApi extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.get("list", "/api-keys")
      .addSuccess(ApiKeyList)
      .annotate(OpenApi.Summary, "The account's live API keys (prefix, name, created, last used; never the key)")
  )
  .add(
    HttpApiEndpoint.post("create", "/api-keys")
      .setPayload(CreateApiKeyRequest)
      .addSuccess(CreatedApiKey)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Create an API key for the account; the full key is in this response only")
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api-keys/:keyId")
      .setPath(ApiKeyPath)
      .addSuccess(RevokedApiKey)
      .annotate(OpenApi.Summary, "Revoke a key of the account: refused from the next request on, on every instance")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
