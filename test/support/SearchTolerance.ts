/**
 * How far a cosine search reports may be from the embedder's full-precision cosine where PostgreSQL has no
 * pgvector and vectors are stored at one byte a component (VectorText.int8Bytes, migration 0044). Twice the largest
 * error measured over the agent-runs set (its spans against its queries and spans) and random unit vectors
 * (docs/search.md, "Index").
 */
export const INT8_COSINE_TOLERANCE = 5e-3
