import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { AuthorizationServerMetadata, ProtectedResourceMetadata } from "../domain/Discovery.ts"

/** OAuth discovery metadata: public, no authentication, no rate limit. */
export class DiscoveryApi extends HttpApiGroup.make("discovery")
  .add(
    HttpApiEndpoint.get("protectedResource", "/.well-known/oauth-protected-resource")
      .addSuccess(ProtectedResourceMetadata)
      .annotate(OpenApi.Summary, "RFC 9728 protected resource metadata; no authentication")
      .annotate(
        OpenApi.Description,
        "OAuth 2.0 protected resource metadata (RFC 9728) for MCP clients and other OAuth-aware callers: which authorization server issues tokens for this API and which scopes exist."
      )
  )
  .add(
    HttpApiEndpoint.get("authorizationServer", "/.well-known/oauth-authorization-server")
      .addSuccess(AuthorizationServerMetadata)
      .annotate(
        OpenApi.Summary,
        "RFC 8414 authorization server metadata, served here when TAPEDECK_AUTH_URL is this server (the default)"
      )
      .annotate(
        OpenApi.Description,
        "OAuth 2.0 authorization server metadata (RFC 8414). Served when the authorization server is this instance; set TAPEDECK_AUTH_URL to point clients elsewhere."
      )
  ) {}
