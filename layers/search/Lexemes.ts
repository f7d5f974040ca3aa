/**
 * The full-text lexemes of a span as the search index stores them (`span_embeddings.lexemes`, an `int4[]`): the
 * 32-bit hash of each distinct lexeme of the English text search configuration, one element per lexeme (two lexemes
 * whose hashes collide keep an element each, so the array's cardinality is the span's distinct lexeme count). The
 * lexical leg only asks whether a span holds a lexeme and how many distinct ones it holds, which the hashes answer
 * (`@>`, `&&`, `cardinality`, a GIN index) in 4 bytes a lexeme instead of a tsvector's entry and text
 * (docs/search.md, "Index").
 *
 * The hash is the upper half of `hashtextextended(lexeme, 0)`: the function PostgreSQL's hash partitioning relies on
 * staying the same across versions, and PGlite has it. SpanIndex.store, its queries and migration 0046 build
 * their SQL from these fragments only.
 */

/** SQL: the int4 hash of the lexeme (a text expression). */
export const lexemeHashSql = (lexeme: string) => `(hashtextextended(${lexeme}, 0) >> 32)::int4`

/** SQL: the int4[] of the hashes of a tsvector expression's lexemes, in the vector's lexeme order. */
export const lexemeHashesSql = (tsvector: string) =>
  `ARRAY(SELECT ${lexemeHashSql("l")} FROM unnest(tsvector_to_array(${tsvector})) AS l)`
