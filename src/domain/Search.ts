import { Schema } from "effect"
import { ProjectId } from "./Ids.ts"
import { Instant } from "./Instant.ts"
import { Span, SpanType } from "./Span.ts"
import { TraceStatus } from "./Trace.ts"
import { withExamples } from "./Examples.ts"
import { optional, required } from "./Described.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Filters of a search (strict): every one given narrows the result. */
export const SearchFilters = Schema.Struct({
  project_id: Schema.optional(ProjectId).annotations({ description: "Spans of the project's traces" }),
  model: Schema.optional(Schema.String.pipe(Schema.maxLength(100))).annotations({
    description: "The span's model, exactly"
  }),
  span_type: Schema.optional(SpanType).annotations({ description: "The span's type" }),
  status: Schema.optional(TraceStatus).annotations({ description: "The status of the span's trace" }),
  date_from: Schema.optional(Instant).annotations({ description: "Spans that started at or after this instant" }),
  date_to: Schema.optional(Instant).annotations({ description: "Spans that started at or before this instant" }),
  min_cost: Schema.optional(Schema.Number.pipe(Schema.finite())).annotations({
    description: "Spans whose cost is at least this (USD)"
  }),
  min_duration_ms: Schema.optional(Schema.Int).annotations({
    description:
      "Spans that lasted at least this long: duration_ms, or ended_at − started_at when duration_ms is absent"
  })
}).annotations({
  identifier: "SearchFilters",
  description: "Narrows the spans searched; every filter given must hold",
  ...strict
})
export type SearchFilters = typeof SearchFilters.Type

/** Body of POST /api/v1/search (strict). */
export const SearchRequest = withExamples(
  Schema.Struct({
    query: required(
      Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10_000)),
      "What to look for, in your own words: matched by meaning against span inputs, outputs, names and errors"
    ),
    filters: optional(SearchFilters, "Narrows the spans searched; every filter given must hold"),
    limit: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100)), { default: () => 20 }).annotations({
      description: "Hits per page, 1 to 100 (default 20)"
    }),
    offset: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 100_000)), { default: () => 0 }).annotations({
      description: "Hits to skip (default 0)"
    })
  }).annotations({ identifier: "SearchRequest", ...strict }),
  {
    query: "the payment was declined while booking",
    filters: { span_type: "tool_call" },
    limit: 10
  }
)
export type SearchRequest = typeof SearchRequest.Type

/** A retrieval leg that found a hit: full-text search or vector similarity. */
export const SearchMatch = Schema.Literal("lexical", "vector")

/**
 * A span as GET /api/v1/traces/{id} renders it, plus its trace, its cosine similarity to the query, its fused
 * ranking score and the legs that found it.
 */
export const SearchHit = Schema.extend(
  Span,
  Schema.Struct({
    trace_id: optional(Schema.String, "The trace the span belongs to"),
    similarity: Schema.optional(Schema.Number.pipe(Schema.between(-1, 1))).annotations({
      description: "Cosine similarity of the span's embedding to the query's"
    }),
    score: Schema.optional(Schema.Number.pipe(Schema.nonNegative())).annotations({
      description:
        "Ranking score, higher is better: the sum over the legs that found the span of 1 / (60 + its rank in that leg), plus 1 when it is one of the lexical leg's first ten and holds at least half of the query's weight"
    }),
    match: Schema.optional(Schema.Array(SearchMatch)).annotations({
      description: "Which retrieval legs found the span: lexical (full text) and/or vector (embedding similarity)"
    })
  })
).annotations({ identifier: "SearchHit" })

/** Response of POST /api/v1/search (strict): in descending order of `score`. */
export const SearchResult = Schema.Struct({
  spans: required(Schema.Array(SearchHit), "The matching spans, best first (descending score)")
}).annotations({ identifier: "SearchResult", ...strict })

/** GET /api/v1/diagnostics: how search is set up on this instance. */
export const Diagnostics = Schema.Struct({
  search: required(
    Schema.Struct({
      embedder: required(Schema.String, "The embedding model in use"),
      embedder_kind: required(
        Schema.Literal("offline", "openai-compatible"),
        "offline (built in, no network) or openai-compatible (a configured embeddings endpoint)"
      ),
      dimensions: required(Schema.NullOr(Schema.Int), "The embeddings' dimensions, or null before the first one"),
      index_mode: required(
        Schema.Literal("pgvector-hnsw", "exact-fallback"),
        "pgvector-hnsw (an approximate vector index) or exact-fallback (every vector compared; no pgvector)"
      ),
      pending_jobs: required(Schema.Int, "Spans waiting to be embedded"),
      indexed_spans: required(Schema.Int, "Spans embedded with the current embedder"),
      stale_spans: required(Schema.Int, "Spans embedded with another embedder, waiting to be embedded again")
    }),
    "How semantic search is set up and how far indexing has got"
  ),
  sinks: Schema.optional(
    Schema.Array(
      Schema.Struct({
        name: required(Schema.String, "The sink's name"),
        pending_jobs: required(Schema.Int, "Deliveries of this account's traces waiting or running"),
        failing_jobs: required(Schema.Int, "Of those, deliveries whose last attempt failed (retried with backoff)"),
        dead_jobs: required(Schema.Int, "Deliveries given up after their last attempt"),
        last_error: required(Schema.NullOr(Schema.String), "The most recent failure, or null")
      })
    )
  ).annotations({ description: "The trace sinks installed as extensions (docs/extensions.md); absent when none is" })
}).annotations({ identifier: "Diagnostics" })
export type Diagnostics = typeof Diagnostics.Type
