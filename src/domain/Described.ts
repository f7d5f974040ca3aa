import { Option, Schema, SchemaAST } from "effect"

/**
 * A field's schema with its description for the API reference (/openapi.json). A struct with defaults is
 * documented by its encoded side, where property-signature annotations are dropped, so a refinement (bounded
 * text, a range) also carries the description in its JSON Schema annotation. Not as a `description` annotation:
 * validation messages are written from that one ("Expected a number between 0 and 1"), and must not change.
 * A schema with an identifier is a model of its own, described once: the field's text stays on the property.
 */
const describe = <S extends Schema.Schema.All>(schema: S, description: string): S => {
  if (Option.isSome(SchemaAST.getIdentifierAnnotation(schema.ast)) || !SchemaAST.isRefinement(schema.ast)) return schema
  const own = Option.getOrUndefined(SchemaAST.getJSONSchemaAnnotation(schema.ast))
  return schema.annotations({ jsonSchema: { ...own, description } }) as S
}

/** A required field with its description. */
export const required = <S extends Schema.Schema.All>(schema: S, description: string) =>
  Schema.propertySignature(describe(schema, description)).annotations({ description })

/** An optional field (`Schema.optional`) with its description. */
export const optional = <S extends Schema.Schema.All>(schema: S, description: string) =>
  Schema.optional(describe(schema, description)).annotations({ description })

/** A field with a default (`Schema.optionalWith … default`) with its description. */
export const withDefault = <S extends Schema.Schema.All>(
  schema: S,
  fallback: () => Schema.Schema.Type<S>,
  description: string
) => Schema.optionalWith(describe(schema, description), { default: fallback }).annotations({ description })
