import { Option, Schema, SchemaAST } from "effect"

/**
 * A field's schema with its description for the API reference (/openapi.json). The description goes on the
 * schema itself, not only on the property signature: a struct with defaults is documented by its encoded side,
 * where property-signature annotations are dropped. A schema with an identifier is a model of its own, shared
 * by other fields: it keeps its own description, and the field's goes on the property signature.
 */
const describe = <S extends Schema.Schema.All>(schema: S, description: string): S => {
  if (Option.isSome(SchemaAST.getIdentifierAnnotation(schema.ast))) return schema
  // A filter with no JSON Schema of its own (NUL-free text, unique names) is skipped by the generator with its
  // annotations; an empty one keeps it, and the description with it. Validation is unchanged.
  const skipped = SchemaAST.isRefinement(schema.ast) && Option.isNone(SchemaAST.getJSONSchemaAnnotation(schema.ast))
  return schema.annotations({ description, ...(skipped ? { jsonSchema: {} } : {}) }) as S
}

/** A required field with its description. */
export const required = <S extends Schema.Schema.All>(schema: S, description: string) =>
  Schema.propertySignature(describe(schema, description)).annotations({ description })

/** An optional field (`Schema.optional`) with its description. */
export const optional = <S extends Schema.Schema.All>(schema: S, description: string) =>
  Schema.optional(describe(schema, description)).annotations({ description })

/** A field with a default (`Schema.optionalWith … default`) with its description. */
export const withDefault = <S extends Schema.Schema.All>(schema: S, fallback: () => Schema.Schema.Type<S>, description: string) =>
  Schema.optionalWith(describe(schema, description), { default: fallback }).annotations({ description })
