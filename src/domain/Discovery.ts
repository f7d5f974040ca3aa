import { Schema } from "effect"

/** RFC 9728 OAuth 2.0 Protected Resource Metadata (additional fields allowed). */
export const ProtectedResourceMetadata = Schema.Struct({
  resource: Schema.String,
  authorization_servers: Schema.Array(Schema.String),
  bearer_methods_supported: Schema.Array(Schema.String),
  scopes_supported: Schema.Array(Schema.String),
  resource_name: Schema.String,
  resource_documentation: Schema.String
}).annotations({ identifier: "ProtectedResourceMetadata" })

/** RFC 8414 OAuth 2.0 Authorization Server Metadata (additional fields allowed). */
export const AuthorizationServerMetadata = Schema.Struct({
  issuer: Schema.String,
  token_endpoint: Schema.String,
  response_types_supported: Schema.Array(Schema.String),
  grant_types_supported: Schema.Array(Schema.String),
  scopes_supported: Schema.Array(Schema.String),
  token_endpoint_auth_methods_supported: Schema.Array(Schema.String),
  service_documentation: Schema.String
}).annotations({ identifier: "AuthorizationServerMetadata" })
