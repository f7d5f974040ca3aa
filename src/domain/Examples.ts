import { Option, Schema, SchemaAST } from "effect"

/**
 * The schema with `examples` written as a client sends them (JSON), for the API reference's samples. Each is
 * decoded here, once: an example that does not validate fails at load (and in the tests) instead of being
 * dropped silently by the JSON Schema generator, which shows the decoded value encoded again.
 */
export const withExamples = <S extends Schema.Schema.AnyNoContext>(
  schema: S,
  ...examples: readonly [Schema.Schema.Encoded<S>, ...ReadonlyArray<Schema.Schema.Encoded<S>>]
): S => {
  const decode = Schema.decodeUnknownSync(schema as Schema.Schema<Schema.Schema.Type<S>, Schema.Schema.Encoded<S>>)
  const decoded = examples.map((example) => decode(example)) as unknown as readonly [
    Schema.Schema.Type<S>,
    ...ReadonlyArray<Schema.Schema.Type<S>>
  ]
  // Annotating again drops the identifier (a derived schema is another schema): it is the same one, so it keeps it.
  const identifier = Option.getOrUndefined(SchemaAST.getIdentifierAnnotation(schema.ast))
  return schema.annotations({ examples: decoded, ...(identifier === undefined ? {} : { identifier }) }) as S
}
