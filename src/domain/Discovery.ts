import { Schema } from "effect"
import { optional, required } from "./Described.ts"

/** RFC 9728 OAuth 2.0 Protected Resource Metadata (additional fields allowed). */
export const ProtectedResourceMetadata = Schema.Struct({
  resource: required(Schema.String, "The protected resource's URL (the MCP endpoint)"),
  authorization_servers: required(Schema.Array(Schema.String), "Issuers that grant access to it"),
  bearer_methods_supported: required(Schema.Array(Schema.String), "How a bearer token may be sent"),
  scopes_supported: required(Schema.Array(Schema.String), "Scopes it understands"),
  resource_name: required(Schema.String, "A human-readable name"),
  resource_documentation: required(Schema.String, "Where its documentation is"),
  tapedeck_api_key_header: required(Schema.String, "Tapedeck's own: the header an API key may be sent in (or Authorization: Bearer)"),
  tapedeck_api_key_prefix: required(Schema.String, "Tapedeck's own: how every API key begins"),
  tapedeck_token_types_supported: required(
    Schema.Array(Schema.Literal("api_key", "jwt")),
    "Tapedeck's own: the credentials this server accepts (jwt only when TAPEDECK_JWT_SECRET is set)"
  )
}).annotations({ identifier: "ProtectedResourceMetadata" })

/** RFC 8414 OAuth 2.0 Authorization Server Metadata (additional fields allowed). */
export const AuthorizationServerMetadata = Schema.Struct({
  issuer: required(Schema.String, "The authorization server's issuer URL"),
  token_endpoint: required(Schema.String, "Where tokens are requested"),
  response_types_supported: required(Schema.Array(Schema.String), "OAuth response types supported"),
  grant_types_supported: required(Schema.Array(Schema.String), "OAuth grant types supported"),
  scopes_supported: required(Schema.Array(Schema.String), "Scopes that can be granted"),
  token_endpoint_auth_methods_supported: required(Schema.Array(Schema.String), "How clients authenticate at the token endpoint"),
  service_documentation: required(Schema.String, "Where the documentation is"),
  tapedeck_jwt_signing_alg_values_supported: optional(
    Schema.Array(Schema.Literal("HS256")),
    "Tapedeck's own: how the JWTs it accepts are signed (present only when TAPEDECK_JWT_SECRET is set)"
  )
}).annotations({ identifier: "AuthorizationServerMetadata" })
