import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { AuthorizationServerMetadata, ProtectedResourceMetadata } from "../domain/Discovery.ts"

/** OAuth discovery metadata: public, no authentication, no rate limit. */
export class DiscoveryApi extends HttpApiGroup.make("discovery")
  .add(
    HttpApiEndpoint.get("protectedResource", "/.well-known/oauth-protected-resource")
      .addSuccess(ProtectedResourceMetadata)
      .annotate(OpenApi.Summary, "RFC 9728 protected resource metadata; no authentication")
  )
  .add(
    HttpApiEndpoint.get("authorizationServer", "/.well-known/oauth-authorization-server")
      .addSuccess(AuthorizationServerMetadata)
      .annotate(
        OpenApi.Summary,
        "RFC 8414 authorization server metadata, served here when TAPEDECK_AUTH_URL is this server (the default)"
      )
  )
{}
