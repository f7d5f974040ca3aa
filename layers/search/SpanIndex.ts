import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { SearchFilters } from "#src/domain/Search"
import type { SpanWire } from "#src/domain/Span"
import { readSpans, type SpanRow, spanSelect } from "../traces/SpanRecords.ts"
import { LAYOUT_SELECT, type LayoutRow, withPayloads } from "../traces/SharedParts.ts"
import { shortHash } from "../platform/Hashes.ts"
import { type SpanTextSource, traceSpanTexts } from "#src/domain/search/SpanText"
import {
  int8Bytes,
  int8Distance,
  int8Hex,
  int8SignBits,
  reals,
  signBits,
  vectorLiteral,
  weightedSignMasks
} from "./VectorText.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { lexemeHashesSql, lexemeHashSql } from "./Lexemes.ts"

export type IndexMode = "pgvector-hnsw" | "exact-fallback"

/** HNSW indexes `vector` up to 2000 dimensions; a larger model is searched exactly. */
export const HNSW_MAX_DIMS = 2000
/**
 * Reciprocal rank fusion: a span's `score` is the sum over the legs that found it of 1 / (RRF_K + its rank in that
 * leg), ranks from 1. The constant is the customary 60: it keeps a first place in one leg from outweighing good
 * places in both.
 */
export const RRF_K = 60
/**
 * A span joins the lexical leg only when the query lexemes it holds carry at least this share of the query's total
 * inverse document frequency: one shared common word is no evidence, and in the fusion it would push aside the
 * vector leg's answers to a query phrased in other words.
 */
export const LEXICAL_MIN_COVERAGE = 0.2
/** Candidates fetched from each leg at least, before the fusion and the page cut. */
const MIN_CANDIDATES = 100

/** A short, stable digest of a text: a span whose text did not change is not embedded again. */
const textHash = (text: string) => shortHash(text)
/** Vectors written per statement where HNSW maintains the index (slow on PGlite: small statements keep each short). */
const STORE_CHUNK_HNSW = 32
/**
 * HNSW's candidate list per scan: pgvector's maximum. Agent spans repeat themselves (the same tool call with other
 * arguments), and the graph over such clusters of near-twins is hard to walk: with the default list the top 20 held
 * far less of the exact answer, and the longer list costs little per query (docs/performance.md, "Search";
 * test/bench/search.ts, column "top 20 as exact").
 */
const HNSW_EF_SEARCH = 1000
/**
 * Without pgvector, the vector leg orders the rows that pass the filters by the Hamming distance of their sign bits
 * to the query's (migration 0026) and re-ranks this many of the best (or 4 × its k, if more) by the exact cosine:
 * its agreement with the exact scan is tested (test/layers/search/prefilter.test.ts), its speed measured
 * (test/bench/search.ts, docs/performance.md).
 */
export const PREFILTER_CANDIDATES = 500
/** Past this offset + limit, a search is exact (HNSW's work stays bounded). */
const MAX_HNSW_DEPTH = 1000
/**
 * When the planner expects at most this many rows to pass the filters, the search is exact: reading them through
 * the filters' indexes costs less than an HNSW scan that must skip the many rows failing the filters, and far less
 * when the filter and the query pull apart (a question about tool errors, filtered to one model's calls, walks the
 * graph a long way before it meets a match). Where the two cross was measured on PGlite at 100k spans
 * (docs/performance.md, "Figures behind choices in the code").
 */
const EXACT_MAX_ROWS = 5000

/** "Plan Rows" of an `EXPLAIN (FORMAT JSON)` result (parsed or as text); Infinity when it cannot be read. */
export const planRows = (plan: unknown): number => {
  let parsed = plan
  if (typeof plan === "string") {
    try {
      parsed = JSON.parse(plan)
    } catch {
      return Number.POSITIVE_INFINITY
    }
  }
  const rows = Array.isArray(parsed)
    ? (parsed[0] as { Plan?: { "Plan Rows"?: unknown } })?.Plan?.["Plan Rows"]
    : undefined
  return typeof rows === "number" && Number.isFinite(rows) ? rows : Number.POSITIVE_INFINITY
}

/** A span as the index job reads it: what its text is built from, and the vector it has now, if any. */
interface SourceRow extends Omit<SpanTextSource, "input" | "output">, LayoutRow {
  readonly trace_id: string
  readonly id: string
  readonly started_at: Date | string
  readonly account_id: string
  readonly text_hash: string | null
  readonly embedder: string | null
  /** It has a vector whose copies of the filterable fields no longer match the span (migration 0013; read by `pendingOfTraces` only). */
  readonly filters_stale?: boolean
}

/** A stored span's key. */
export interface SpanKey {
  readonly traceId: string
  readonly spanId: string
}

/** A span to (re-)embed: its key, its text and the text's digest. */
export interface PendingSpan {
  readonly traceId: string
  readonly spanId: string
  readonly accountId: string
  readonly text: string
  readonly hash: string
}

export type Leg = "lexical" | "vector"

export interface Hit {
  readonly span: SpanWire & {
    readonly trace_id: string
    readonly similarity: number
    readonly score: number
    readonly match: ReadonlyArray<Leg>
  }
}

/** span_embeddings' copies of the span fields that search filters on (migration 0013), and their values from `s`. */
const FILTER_COLUMNS = "span_type, model, started_at, cost, duration_ms"
const DURATION = "COALESCE(s.duration_ms::float8, EXTRACT(EPOCH FROM (s.ended_at - s.started_at)) * 1000)"
const FILTER_VALUES = `s.span_type, s.model, s.started_at, s.cost, ${DURATION} AS duration_ms`
/** Whether the vector `e` (if any) of span `s` holds other copies of the filterable fields than `s` has now. */
const FILTERS_STALE = `(e.span_id IS NOT NULL AND (e.span_type, e.model, e.started_at, e.cost, e.duration_ms)
  IS DISTINCT FROM (s.span_type, s.model, s.started_at, s.cost, ${DURATION}))`

/** The vector as SQL text, components rounded to 7 decimals (VectorText.ts). */
const vectorText = (mode: IndexMode, v: Float32Array) =>
  mode === "pgvector-hnsw" ? vectorLiteral(v, "[", "]") : vectorLiteral(v, "{", "}")

/**
 * The text of a query for the lexical leg: the same parser step as the spans' (`ftsText`), so an identifier or an
 * error code in the query meets its whole form in the spans; at most the first 2000 characters.
 */
export const lexicalQueryText = (input: string) => ftsText(input.slice(0, 2000))

/** Whether a whitespace-free token splits into words: it holds identifier punctuation or a camelCase hump. */
const SPLITS = /[_.:/-]|\p{Ll}\p{Lu}/u

/** An identifier's words: its punctuation and camelCase humps turned into spaces. */
const identifierWords = (token: string) => token.replace(/[_.:/-]+/g, " ").replace(/(\p{Ll})(\p{Lu})/gu, "$1 $2")

/** An identifier inside a token: words joined by "_", "." or "-", or a camelCase word. */
const IDENTIFIER = /[\p{L}\p{N}]+(?:[_.-][\p{L}\p{N}]+)+|\p{Ll}[\p{Ll}\p{N}]*(?:\p{Lu}[\p{Ll}\p{N}]*)+/gu

/**
 * An identifier kept whole for full-text search: its letters and digits in lower case, without the punctuation
 * (`ERR_TLS_CERT_ALTNAME_INVALID` → `errtlscertaltnameinvalid`, `card_declined` → `carddeclined`), since
 * PostgreSQL's parser would otherwise split it into common words.
 */
const wholeIdentifier = (identifier: string) => identifier.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "")

/**
 * The text the full-text vector is built from: the span's text, then for each distinct identifier in it its
 * words (`card_declined` → `card declined`) and its whole form (see `wholeIdentifier`). Queries go through the
 * same step (`lexicalQueryText`), so both sides yield the same lexemes.
 */
export const ftsText = (text: string) => {
  const tokens = new Set<string>()
  forEachSplittingToken(text, (token) => tokens.add(token))
  const words = new Set<string>()
  for (const token of tokens) {
    words.add(identifierWords(token))
    for (const m of token.matchAll(IDENTIFIER)) {
      const whole = wholeIdentifier(m[0])
      if (whole.length >= 3 && whole.length <= 64) words.add(whole)
    }
  }
  return words.size === 0 ? text : `${text}\n${[...words].join(" ")}`
}

const WHITESPACE = /\s/

/**
 * Calls `f` with each whitespace-delimited token of `text` that SPLITS matches, in order: the same tokens as
 * `text.matchAll(/\S+/g)` filtered by `SPLITS.test`, found by one pass over the character codes (the regex way
 * allocated a match per token). Tokens with characters beyond ASCII are left to SPLITS.
 */
const forEachSplittingToken = (text: string, f: (token: string) => void) => {
  let start = -1
  let splits = false
  let beyondAscii = false
  let lower = false
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 32
    const space = c === 32 || (c >= 9 && c <= 13) || (c > 127 && WHITESPACE.test(text[i]!))
    if (space) {
      if (start >= 0) {
        const token = text.slice(start, i)
        if (splits || (beyondAscii && SPLITS.test(token))) f(token)
      }
      start = -1
      splits = beyondAscii = lower = false
      continue
    }
    if (start < 0) start = i
    if (c > 127) {
      beyondAscii = true
      lower = false
    } else if (c === 95 || c === 46 || c === 58 || c === 47 || c === 45) {
      // _ . : / -
      splits = true
      lower = false
    } else if (c >= 65 && c <= 90) {
      if (lower) splits = true
      lower = false
    } else {
      lower = c >= 97 && c <= 122
    }
  }
}

/**
 * The span-embedding store and its searches: pgvector HNSW (iterative scans keep filtered queries complete, and
 * a short answer falls back to an exact scan) or, without pgvector, an exact scan that ranks the same way.
 */
export class SpanIndex extends Effect.Service<SpanIndex>()("tapedeck/search/SpanIndex", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const detect = Effect.gen(function* () {
      const column = yield* sql<{ type: string }>`
        SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
        WHERE attrelid = 'span_embeddings'::regclass AND attname = 'embedding'`
      // pgvector: `halfvec` (migration 0036; `vector` where the extension predates half precision). Otherwise the
      // one-byte-a-component `bytea` of the exact fallback (migration 0044).
      const type = column[0]?.type
      const mode: IndexMode = type === "halfvec" || type === "vector" ? "pgvector-hnsw" : "exact-fallback"
      const columnType = type === "vector" ? "vector" : "halfvec"
      const version =
        mode === "pgvector-hnsw"
          ? ((yield* sql<{ v: string }>`SELECT extversion AS v FROM pg_extension WHERE extname = 'vector'`)[0]?.v ??
            "0")
          : "0"
      const [major = 0, minor = 0] = version.split(".").map(Number)
      return { mode, columnType, iterative: major > 0 || minor >= 8, version }
    }).pipe(Effect.orDie)
    const setup = yield* Effect.cached(detect)

    const ids = new Map<string, number>()
    /**
     * The id of an embedder's name and dimension in `search_embedders` (migration 0044), added on first use. Two
     * instances adding it at once: the loser's insert does nothing and its statement cannot see the winner's row
     * yet, so it reads again.
     */
    const embedderId = Effect.fn("SpanIndex.embedderId")(function* (embedder: string, dims: number) {
      const key = `${dims}:${embedder}`
      const known = ids.get(key)
      if (known !== undefined) return known
      for (let attempt = 0; ; attempt++) {
        const rows = yield* sql<{ id: number }>`
          WITH added AS (
            INSERT INTO search_embedders (name, dims) VALUES (${embedder}, ${dims})
            ON CONFLICT (name, dims) DO NOTHING RETURNING id
          )
          SELECT id FROM added UNION ALL SELECT id FROM search_embedders WHERE name = ${embedder} AND dims = ${dims}`
        const id = rows[0]?.id
        if (id !== undefined) {
          ids.set(key, Number(id))
          return Number(id)
        }
        if (attempt >= 3) return yield* Effect.dieMessage(`search_embedders: no id for ${embedder}`)
      }
    }, Effect.orDie)

    const ensured = new Set<number>()
    /** Creates the embedder's HNSW index when missing (pgvector only; idempotent across instances). */
    const ensureIndex = Effect.fn("SpanIndex.ensureIndex")(function* (embedder: string, dims: number) {
      const { mode } = yield* setup
      if (mode !== "pgvector-hnsw" || dims > HNSW_MAX_DIMS) return
      const id = yield* embedderId(embedder, dims)
      if (ensured.has(id)) return
      const name = `span_embeddings_hnsw_${id}`
      yield* sql
        .unsafe(`
        CREATE INDEX IF NOT EXISTS ${name} ON span_embeddings
        USING hnsw ((embedding::vector(${dims})) vector_cosine_ops) WHERE embedder_id = ${id}`)
        .pipe(
          // Two instances creating it at once: the loser sees a duplicate; the index exists either way.
          Effect.catchTag("SqlError", (e) =>
            String(e.cause ?? e.message).includes("already exists") ? Effect.void : Effect.fail(e)
          )
        )
      ensured.add(id)
    }, Effect.orDie)

    /**
     * The rows to embed (those whose text or embedder changed), and the others whose vector only needs its copies of
     * the filterable fields synced (a vector stored anew copies them anyway). `rows` are whole traces: a model
     * call's text leaves out what earlier spans of its trace hold (`traceSpanTexts`).
     */
    const toPending = (rows: ReadonlyArray<SourceRow>, embedder: string) => {
      const pending: Array<PendingSpan> = []
      const filtersStale: Array<SpanKey> = []
      const texts = traceSpanTexts(
        rows.map((row) => ({
          ...row,
          input: row.input === null ? undefined : JSON.parse(row.input),
          output: row.output === null ? undefined : JSON.parse(row.output),
          started_at: new Date(row.started_at).getTime()
        }))
      )
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i]!
        const text = texts[i]!
        const hash = textHash(text)
        if (row.embedder !== embedder || row.text_hash !== hash) {
          pending.push({ traceId: row.trace_id, spanId: row.id, accountId: row.account_id, text, hash })
        } else if (row.filters_stale === true) {
          filtersStale.push({ traceId: row.trace_id, spanId: row.id })
        }
      }
      return { pending, filtersStale }
    }

    const SOURCE = `s.trace_id, s.id, s.account_id, s.started_at, s.name, s.span_type, s.model,
      s.input::text AS input, s.output::text AS output, ${LAYOUT_SELECT},
      s.error, e.text_hash, (SELECT m.name FROM search_embedders m WHERE m.id = e.embedder_id) AS embedder`

    /**
     * The spans of these traces (of the account) whose text or embedder changed since they were embedded, and
     * those whose filterable fields changed without their text (see `syncFilters`).
     */
    const pendingOfTraces = Effect.fn("SpanIndex.pendingOfTraces")(function* (
      accountId: AccountId,
      traceIds: ReadonlyArray<string>,
      embedder: string
    ) {
      if (traceIds.length === 0) return { pending: [], filtersStale: [] }
      const rows = yield* sql<SourceRow>`
          SELECT ${sql.literal(SOURCE)}, ${sql.literal(FILTERS_STALE)} AS filters_stale
          FROM spans s LEFT JOIN span_embeddings e ON e.trace_id = s.trace_id AND e.span_id = s.id
          WHERE s.trace_id = ANY(${uuidArray(traceIds)}::uuid[]) AND s.account_id = ${accountId}`
      return toPending(yield* withPayloads(sql, rows), embedder)
    }, Effect.orDie)

    /**
     * The spans to embed of the traces of up to `limit` spans of the account with no vector from this embedder (the
     * re-embed job's batches): whole traces, as a span's text depends on the earlier spans of its trace.
     */
    const pendingOfAccount = Effect.fn("SpanIndex.pendingOfAccount")(function* (
      accountId: AccountId,
      embedder: string,
      limit: number
    ) {
      const rows = yield* sql<SourceRow>`
          SELECT ${sql.literal(SOURCE)}
          FROM spans s LEFT JOIN span_embeddings e ON e.trace_id = s.trace_id AND e.span_id = s.id
          WHERE s.account_id = ${accountId} AND s.trace_id IN (
            SELECT DISTINCT p.trace_id FROM (
              SELECT s.trace_id
              FROM spans s LEFT JOIN span_embeddings e ON e.trace_id = s.trace_id AND e.span_id = s.id
              WHERE s.account_id = ${accountId}
                AND (e.span_id IS NULL OR e.embedder_id IS NULL
                     OR e.embedder_id NOT IN (SELECT m.id FROM search_embedders m WHERE m.name = ${embedder}))
              LIMIT ${limit}
            ) p
          )`
      return toPending(yield* withPayloads(sql, rows), embedder).pending
    }, Effect.orDie)

    /**
     * Copies the filterable fields of these spans onto their vectors where they changed without the text (a cost
     * promoted by a later export, say): the index job runs it for the spans `pendingOfTraces` found so.
     */
    const syncFilters = Effect.fn("SpanIndex.syncFilters")(function* (
      accountId: AccountId,
      spans: ReadonlyArray<SpanKey>
    ) {
      if (spans.length === 0) return
      yield* sql`
          UPDATE span_embeddings e SET
            span_type = x.span_type, model = x.model, started_at = x.started_at, cost = x.cost, duration_ms = x.duration_ms
          FROM (
            SELECT s.trace_id, s.id, ${sql.literal(FILTER_VALUES)}
            FROM unnest(${uuidArray(spans.map((k) => k.traceId))}::uuid[], ${uuidArray(spans.map((k) => k.spanId))}::uuid[])
              AS k(trace_id, id)
            JOIN spans s ON s.trace_id = k.trace_id AND s.id = k.id
            WHERE s.account_id = ${accountId}
          ) x
          WHERE e.trace_id = x.trace_id AND e.span_id = x.id
            AND (e.span_type, e.model, e.started_at, e.cost, e.duration_ms)
                IS DISTINCT FROM (x.span_type, x.model, x.started_at, x.cost, x.duration_ms)`
    }, Effect.orDie)

    /** Writes vectors (replacing a span's previous one), with the full-text vector of the same text. */
    const store = Effect.fn("SpanIndex.store")(function* (
      embedder: string,
      spans: ReadonlyArray<PendingSpan>,
      vectors: ReadonlyArray<Float32Array>
    ) {
      if (spans.length === 0) return
      const { columnType, mode } = yield* setup
      const dims = vectors[0]!.length
      yield* ensureIndex(embedder, dims)
      const id = yield* embedderId(embedder, dims)
      // HNSW inserts are slow on embedded PGlite (one shared connection): small statements keep other work
      // (an enforcement check, a request) from waiting long behind an indexing batch.
      const chunk = mode === "pgvector-hnsw" ? STORE_CHUNK_HNSW : spans.length
      for (let at = 0; at < spans.length; at += chunk) {
        yield* storeChunk(mode, columnType, id, spans.slice(at, at + chunk), vectors.slice(at, at + chunk))
      }
    }, Effect.orDie)

    const storeChunk = (
      mode: IndexMode,
      columnType: string,
      embedderId: number,
      spans: ReadonlyArray<PendingSpan>,
      vectors: ReadonlyArray<Float32Array>
    ) =>
      Effect.gen(function* () {
        const records = JSON.stringify(
          spans.map((s, i) => {
            const bytes = mode === "pgvector-hnsw" ? undefined : int8Bytes(vectors[i]!)
            return {
              trace_id: s.traceId,
              span_id: s.spanId,
              account_id: s.accountId,
              text_hash: s.hash,
              body: ftsText(s.text),
              embedding: bytes === undefined ? vectorText(mode, vectors[i]!) : int8Hex(bytes),
              sign_bits: bytes === undefined ? signBits(vectors[i]!) : int8SignBits(bytes)
            }
          })
        )
        const embedding =
          mode === "pgvector-hnsw" ? sql`x.embedding::${sql.literal(columnType)}` : sql`decode(x.embedding, 'hex')`
        // The filterable fields are copied from the span as it is now (a span deleted meanwhile is not stored). The
        // full-text lexemes as their hashes (Lexemes.ts): the lexical leg asks only whether a span holds a lexeme and
        // how many it holds (migration 0046).
        yield* sql`
          INSERT INTO span_embeddings (trace_id, span_id, account_id, embedder_id, embedding, sign_bits, text_hash, lexemes,
                                       ${sql.literal(FILTER_COLUMNS)})
          SELECT x.trace_id, x.span_id, x.account_id, ${embedderId}::smallint, ${embedding},
                 x.sign_bits::bit varying,
                 x.text_hash, ${sql.literal(lexemeHashesSql("to_tsvector('english', x.body)"))}, ${sql.literal(FILTER_VALUES)}
          FROM jsonb_to_recordset(${records}::jsonb)
            AS x(trace_id uuid, span_id uuid, account_id uuid, text_hash text, body text, embedding text, sign_bits text)
          JOIN spans s ON s.trace_id = x.trace_id AND s.id = x.span_id
          ON CONFLICT (trace_id, span_id) DO UPDATE SET
            account_id = EXCLUDED.account_id, embedder_id = EXCLUDED.embedder_id,
            embedding = EXCLUDED.embedding, sign_bits = EXCLUDED.sign_bits, text_hash = EXCLUDED.text_hash, lexemes = EXCLUDED.lexemes,
            span_type = EXCLUDED.span_type, model = EXCLUDED.model, started_at = EXCLUDED.started_at,
            cost = EXCLUDED.cost, duration_ms = EXCLUDED.duration_ms`
      })

    /**
     * The rows of span_embeddings (alias e, joined with its trace t) a search may return: the account's live spans
     * under this embedder that pass the filters. Span-level filters read e's own copies of the span's fields (the
     * HNSW scan filters as it goes, a selective filter finds its rows through their indexes); trace-level ones
     * (status, project, deletion) read the trace, which is where they change.
     */
    const candidateWhere = (accountId: AccountId, embedderId: number, f: SearchFilters | undefined) => {
      const parts = [
        sql`e.account_id = ${accountId}`,
        // A literal: the planner matches it against the partial HNSW index's predicate.
        sql`e.embedder_id = ${sql.literal(String(embedderId))}`,
        sql`t.account_id = ${accountId}`,
        sql`t.deleted_at IS NULL`
      ]
      if (f?.project_id !== undefined) parts.push(sql`t.project_id = ${f.project_id}`)
      if (f?.status !== undefined) parts.push(sql`t.status = ${f.status}`)
      if (f?.model !== undefined) parts.push(sql`e.model = ${f.model}`)
      if (f?.span_type !== undefined) parts.push(sql`e.span_type = ${f.span_type}`)
      if (f?.date_from !== undefined) parts.push(sql`e.started_at >= ${new Date(f.date_from.epochMillis)}`)
      if (f?.date_to !== undefined) parts.push(sql`e.started_at <= ${new Date(f.date_to.epochMillis)}`)
      if (f?.min_cost !== undefined) parts.push(sql`e.cost >= ${f.min_cost}`)
      if (f?.min_duration_ms !== undefined) parts.push(sql`e.duration_ms >= ${f.min_duration_ms}`)
      return sql.and(parts)
    }

    /** The planner's estimate of the rows `where` lets through (EXPLAIN: planned, not run). */
    const estimatedRows = (where: ReturnType<typeof candidateWhere>) =>
      sql<{ "QUERY PLAN": unknown }>`
        EXPLAIN (FORMAT JSON) SELECT 1 FROM span_embeddings e JOIN traces t ON t.id = e.trace_id WHERE ${where}`.pipe(
        Effect.map((rows) => planRows(rows[0]?.["QUERY PLAN"]))
      )

    /**
     * One page of the account's spans, best first, by hybrid retrieval: the k nearest vectors (the vector leg) and
     * the k best full-text matches (the lexical leg: spans holding query lexemes worth LEXICAL_MIN_COVERAGE of the
     * query's inverse document frequency, ranked by the sum over the lexemes they hold of the lexeme's inverse
     * document frequency among the account's spans, over the log of the span's distinct lexemes), both under
     * the same filters, fused by reciprocal rank (RRF_K). `score` is the fused score, `similarity` the cosine,
     * `match` the legs that found the span.
     */
    const search = Effect.fn("SpanIndex.search")(function* (input: {
      readonly accountId: AccountId
      readonly embedder: string
      readonly query: string
      readonly vector: Float32Array
      readonly filters: SearchFilters | undefined
      readonly limit: number
      readonly offset: number
      /**
       * Tests compare the paths: "exact" scans every matching row by cosine; "hnsw" answers from the HNSW scan
       * alone (no selectivity probe, no exact retry when it comes back short); "prefilter" is the sign-bit
       * prefilter and exact re-rank (the default without pgvector, available with it for comparison).
       */
      readonly path?: "exact" | "hnsw" | "prefilter"
      /** Tests shrink the prefilter's cut (default PREFILTER_CANDIDATES) to measure it on small sets. */
      readonly prefilterCut?: number
      /** The relevance harness measures each leg alone; the service always uses both. */
      readonly legs?: ReadonlyArray<Leg>
    }) {
      const { iterative, mode } = yield* setup
      const dims = input.vector.length
      const depth = input.offset + input.limit
      const k = Math.max(MIN_CANDIDATES, 2 * depth)
      const id = yield* embedderId(input.embedder, dims)
      const where = candidateWhere(input.accountId, id, input.filters)
      const byEmbedder = sql`e.embedder_id = ${sql.literal(String(id))}`
      const q = vectorText(mode, input.vector)
      const queryText = lexicalQueryText(input.query)
      const legs = input.legs ?? ["lexical", "vector"]
      const useVector = legs.includes("vector")
      const useLexical = legs.includes("lexical")

      const distance =
        mode === "pgvector-hnsw"
          ? sql`(e.embedding::vector(${sql.literal(String(dims))}) <=> ${q}::vector(${sql.literal(String(dims))}))`
          : // The cosine between the query and the stored direction (one byte a component, VectorText.int8Bytes):
            // the dot product over the stored vector's norm (its scale was not kept); 0 for a zero vector.
            sql`(1 - COALESCE((
              SELECT sum(x.b * x.q) / NULLIF(sqrt(sum(x.b * x.b)), 0)
              FROM (
                SELECT (get_byte(e.embedding, (u.o - 1)::int) - 128)::float8 AS b, u.q
                FROM unnest(${q}::real[]) WITH ORDINALITY AS u(q, o)
              ) x), 0))`

      // The k nearest rows that pass the filters. Exact: the matching rows (found through the filters' indexes
      // when selective), ordered by distance. HNSW: the index scan in distance order, filtering as it goes;
      // iterative scans continue past ef_search until k rows pass (or hnsw.max_scan_tuples were scanned).
      const filtered = input.filters !== undefined && Object.values(input.filters).some((v) => v !== undefined)
      // Without pgvector (or when asked): the sign-bit prefilter, then the exact cosine of its best candidates,
      // each embedding read by primary key (only the short bit strings are read for every matching row).
      const prefilter = input.path === "prefilter" || (mode === "exact-fallback" && input.path !== "exact")
      const prefilterCut = input.prefilterCut ?? Math.max(PREFILTER_CANDIDATES, 4 * k)
      // Built only when asked for: the masks sort the query's dimensions.
      const prefilterCandidates = () => {
        const query = weightedSignMasks(input.vector)
        const signDistance = sql.join(
          " + ",
          false
        )(
          query.classes.map(
            (c) =>
              sql`${sql.literal(c.weight.toPrecision(6))} * bit_count((e.sign_bits # ${query.bits}::bit varying) & ${c.mask}::bit varying)`
          )
        )
        return sql`
            SELECT e.trace_id, e.span_id
            FROM span_embeddings e JOIN traces t ON t.id = e.trace_id
            WHERE ${where}
            ORDER BY ${signDistance} NULLS FIRST
            LIMIT ${prefilterCut}`
      }
      // Each candidate's vector, read by primary key.
      const withEmbeddings = (candidates: ReturnType<typeof prefilterCandidates>) => sql`
            FROM (${candidates}) p
            JOIN LATERAL (
              SELECT e.embedding FROM span_embeddings e WHERE e.trace_id = p.trace_id AND e.span_id = p.span_id LIMIT 1
            ) e ON true`
      // Without pgvector the prefilter's candidates are re-ranked here rather than in SQL: their one-byte vectors
      // are read (a few hundred of about 260 bytes) and each cosine taken in a loop, where the SQL expression
      // unnests the query and reads a byte per component for every row (docs/performance.md, "Search").
      const rerankHere = prefilter && mode === "exact-fallback" && useVector
      /**
       * The k nearest of the prefilter's candidates, by the distance SQL would compute (`int8Distance`). Built only
       * when asked for, as the prefilter's statement is.
       */
      const reranked = () =>
        Effect.map(
          sql<{ trace_id: string; span_id: string; embedding: Uint8Array }>`
            SELECT p.trace_id, p.span_id, e.embedding ${withEmbeddings(prefilterCandidates())}`,
          (rows) => {
            const query = reals(q)
            return rows
              .map((r) => ({ trace_id: r.trace_id, span_id: r.span_id, distance: int8Distance(r.embedding, query) }))
              .sort(
                (a, b) =>
                  a.distance - b.distance ||
                  (a.trace_id < b.trace_id ? -1 : a.trace_id > b.trace_id ? 1 : 0) ||
                  (a.span_id < b.span_id ? -1 : a.span_id > b.span_id ? 1 : 0)
              )
              .slice(0, k)
          }
        )
      type Ranked = ReadonlyArray<{ readonly trace_id: string; readonly span_id: string; readonly distance: number }>
      const vectorCandidates = (exact: boolean, ranked: Ranked | undefined) =>
        ranked !== undefined
          ? sql`
              SELECT * FROM unnest(${uuidArray(ranked.map((r) => r.trace_id))}::uuid[],
                                   ${uuidArray(ranked.map((r) => r.span_id))}::uuid[],
                                   ${`{${ranked.map((r) => String(r.distance)).join(",")}}`}::float8[])
                AS v0(trace_id, span_id, distance)`
          : prefilter
            ? sql`
              SELECT p.trace_id, p.span_id, ${distance} AS distance ${withEmbeddings(prefilterCandidates())}
              ORDER BY distance
              LIMIT ${k}`
            : !exact && !filtered
              ? // Unfiltered HNSW: the index scan alone, its k rows then checked against their traces (a join inside
                // the ordered scan costs the scan its speed: pgvector stops walking the index in order).
                sql`
              SELECT a.trace_id, a.span_id, a.distance
              FROM (
                SELECT e.trace_id, e.span_id, ${distance} AS distance
                FROM span_embeddings e
                WHERE e.account_id = ${input.accountId} AND ${byEmbedder}
                ORDER BY ${distance}
                LIMIT ${k}
              ) a
              JOIN LATERAL (
                SELECT t.account_id, t.deleted_at FROM traces t WHERE t.id = a.trace_id LIMIT 1
              ) t ON true
              WHERE t.account_id = ${input.accountId} AND t.deleted_at IS NULL
              ORDER BY a.distance
              LIMIT ${k}`
              : sql`
              SELECT e.trace_id, e.span_id, ${distance} AS distance
              FROM span_embeddings e JOIN traces t ON t.id = e.trace_id
              WHERE ${where}
              ORDER BY ${distance}${exact && mode === "pgvector-hnsw" ? sql` + 0` : sql``}
              LIMIT ${k}`

      // Row lookups by primary key (LATERAL … LIMIT 1): the planner must not hash-join a few hundred candidates
      // against every span of the table. The lexical leg: the query's lexemes (stop words dropped, stemmed), each
      // weighted by its BM25 inverse document frequency among the account's spans under this embedder.
      const run = (exact: boolean, ranked: Ranked | undefined) =>
        sql<
          SpanRow & {
            trace_id: string
            distance: number
            score: number
            vrank: number | null
            lrank: number | null
            candidates: number
          }
        >`
            WITH v0 AS MATERIALIZED (${useVector ? vectorCandidates(exact, ranked) : sql`SELECT NULL::uuid AS trace_id, NULL::uuid AS span_id, NULL::float8 AS distance WHERE false`}
            ), v AS (
              -- Ranked by the distance to 6 decimals: pgvector (float4) and the exact fallback (float8) differ in
              -- the last digits, and near-twin spans must rank alike on both.
              SELECT trace_id, span_id, distance,
                     row_number() OVER (ORDER BY round(distance::numeric, 6), trace_id, span_id) AS rank FROM v0
            ), terms AS MATERIALIZED (
              SELECT DISTINCT lexeme, ${sql.literal(lexemeHashSql("lexeme"))} AS h
              FROM unnest(tsvector_to_array(to_tsvector('english', ${useLexical ? queryText : ""}))) AS lexeme
              LIMIT 64
            ), docs AS MATERIALIZED (
              SELECT count(*)::float8 AS n FROM span_embeddings e
              WHERE e.account_id = ${input.accountId} AND ${byEmbedder}
                AND EXISTS (SELECT 1 FROM terms)
            ), weights AS MATERIALIZED (
              SELECT terms.lexeme, terms.h, ln(1 + (docs.n - df.n + 0.5) / (df.n + 0.5)) AS idf
              FROM terms CROSS JOIN docs
              CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS n FROM span_embeddings e
                WHERE e.account_id = ${input.accountId} AND ${byEmbedder}
                  AND e.lexemes @> ARRAY[terms.h]
              ) df
            ), needed AS MATERIALIZED (
              -- A span holding only the commonest lexemes, together worth less than the coverage the leg asks for,
              -- cannot join it: the index match looks for the others only (the same result, far fewer rows to rank
              -- when the query has a common word).
              SELECT h FROM (
                SELECT h, sum(idf) OVER (ORDER BY idf, lexeme) AS below, sum(idf) OVER () AS total FROM weights
              ) x
              WHERE below >= ${LEXICAL_MIN_COVERAGE} * total
            ), any_term AS MATERIALIZED (
              SELECT array_agg(h) AS hs FROM needed
            ), l0 AS MATERIALIZED (
              SELECT m.trace_id, m.span_id, m.relevance
              FROM (
                -- Each lexeme the span holds weighs its idf over the log of the span's distinct lexeme count (as
                -- ts_rank(vector, lexeme, 1) weighs a lexeme of a vector without positions); in double precision:
                -- ts_rank's float4 differs in the last bits between builds (PGlite is WASM), and near-ties would
                -- order differently.
                SELECT e.trace_id, e.span_id, r.idf / ln(cardinality(e.lexemes) + 1.0) AS relevance, r.idf
                FROM span_embeddings e
                JOIN LATERAL (
                  SELECT t.account_id, t.deleted_at, t.project_id, t.status FROM traces t WHERE t.id = e.trace_id LIMIT 1
                ) t ON true
                CROSS JOIN LATERAL (
                  SELECT sum(w.idf) AS idf FROM weights w WHERE w.h = ANY(e.lexemes)
                ) r
                WHERE ${where} AND e.lexemes && (SELECT hs FROM any_term)
              ) m
              WHERE m.idf >= ${LEXICAL_MIN_COVERAGE} * (SELECT sum(idf) FROM weights)
              ORDER BY round(m.relevance::numeric, 6) DESC, m.trace_id, m.span_id
              LIMIT ${k}
            ), l AS (
              -- To 6 decimals too: the logarithm may differ in the last bits between builds (PGlite is WASM).
              SELECT trace_id, span_id,
                     row_number() OVER (ORDER BY round(relevance::numeric, 6) DESC, trace_id, span_id) AS rank FROM l0
            ), c AS (
              SELECT trace_id, span_id, min(vrank) AS vrank, min(lrank) AS lrank, min(distance) AS distance
              FROM (
                SELECT trace_id, span_id, rank AS vrank, NULL::bigint AS lrank, distance FROM v
                UNION ALL SELECT trace_id, span_id, NULL::bigint, rank, NULL::float8 FROM l
              ) x
              GROUP BY trace_id, span_id
            ), ranked AS (
              -- The vector leg's rows have their distance; the others' is computed (the fusion's tie-break).
              SELECT s.trace_id, ${sql.literal(spanSelect())}, COALESCE(c.distance, ${distance}) AS distance, c.vrank, c.lrank,
                     COALESCE(1.0 / (${RRF_K} + c.vrank), 0) + COALESCE(1.0 / (${RRF_K} + c.lrank), 0) AS score
              FROM c
              JOIN LATERAL (
                SELECT e.embedding FROM span_embeddings e WHERE e.trace_id = c.trace_id AND e.span_id = c.span_id LIMIT 1
              ) e ON true
              JOIN LATERAL (
                SELECT * FROM spans s WHERE s.trace_id = c.trace_id AND s.id = c.span_id LIMIT 1
              ) s ON true
            )
            SELECT ranked.*, (SELECT count(*)::int FROM v) AS candidates FROM ranked
            ORDER BY score DESC, round(distance::numeric, 6), trace_id, id
            LIMIT ${input.limit} OFFSET ${input.offset}`

      const toHits = (
        rows: ReadonlyArray<
          SpanRow & { trace_id: string; distance: number; score: number; vrank: number | null; lrank: number | null }
        >
      ) =>
        Effect.map(readSpans(sql, rows), (read) =>
          read.map(({ row, span }): Hit => {
            // A query with no word in it embeds to the zero vector: its cosine is undefined, reported as 0.
            const cosine = 1 - Number(row.distance)
            const similarity = Number.isFinite(cosine) ? Math.max(-1, Math.min(1, cosine)) : 0
            const match: Array<Leg> = []
            if (row.lrank !== null) match.push("lexical")
            if (row.vrank !== null) match.push("vector")
            return { span: { ...span, trace_id: row.trace_id, similarity, score: Number(row.score), match } }
          })
        )

      const inTransaction = (exact: boolean) =>
        sql.withTransaction(
          Effect.gen(function* () {
            if (!exact) {
              // The ordered HNSW scan is the plan: a filter the planner thinks selective must not turn it into a
              // scan of every matching row and a sort (a selective filter took the exact path already). Unfiltered,
              // the scan stands alone and the full-text candidates keep their own plan. One statement (SET LOCAL
              // each would be a round trip of its own).
              const settings: Array<readonly [string, string]> = [["hnsw.ef_search", String(HNSW_EF_SEARCH)]]
              if (iterative) settings.push(["hnsw.iterative_scan", "relaxed_order"])
              if (filtered) settings.push(["enable_seqscan", "off"], ["enable_sort", "off"])
              yield* sql.unsafe(
                `SELECT ${settings.map(([name, value]) => `set_config('${name}', '${value}', true)`).join(", ")}`
              )
            }
            return yield* run(exact, rerankHere ? yield* reranked() : undefined)
          })
        )

      const hnswable =
        mode === "pgvector-hnsw" &&
        dims <= HNSW_MAX_DIMS &&
        depth <= MAX_HNSW_DEPTH &&
        input.path !== "exact" &&
        input.path !== "prefilter"
      if (hnswable && input.path === "hnsw") return yield* toHits(yield* inTransaction(false))
      // A filter few rows pass: the exact scan reads just those (through the filters' indexes), where an HNSW
      // scan would walk past the many that fail before it found k that pass, or come back short. The planner's
      // estimate decides (statistics kept by autovacuum, on PGlite by EmbeddedMaintenance): counting the rows
      // would cost about what the exact scan does. Without filters, HNSW first; a short answer (a small
      // account) retries exactly below.
      const selective = hnswable && filtered && (yield* estimatedRows(where)) <= EXACT_MAX_ROWS
      const hnsw = hnswable && !selective

      let rows = yield* inTransaction(!hnsw)
      // Fewer than k rows passed the filters in the HNSW scan: it stopped at hnsw.max_scan_tuples (or without
      // iterative scans, at ef_search), and matching rows may lie beyond, so go exact.
      if (hnsw && useVector && (rows[0]?.candidates ?? 0) < k) rows = yield* inTransaction(true)
      return yield* toHits(rows)
    }, Effect.orDie)

    /** The account's search-index state under the current embedder, for diagnostics. */
    const stats = Effect.fn("SpanIndex.stats")(function* (
      accountId: AccountId,
      embedder: string,
      jobKinds: ReadonlyArray<string>
    ) {
      const rows = yield* sql<{ indexed: number; stale: number; pending: number }>`
          SELECT
            (SELECT count(*)::int FROM span_embeddings
               WHERE account_id = ${accountId} AND embedder_id IN (SELECT id FROM search_embedders WHERE name = ${embedder})) AS indexed,
            (SELECT count(*)::int FROM spans s
               LEFT JOIN span_embeddings e ON e.trace_id = s.trace_id AND e.span_id = s.id
                 AND e.embedder_id IN (SELECT id FROM search_embedders WHERE name = ${embedder})
               WHERE s.account_id = ${accountId} AND e.span_id IS NULL) AS stale,
            (SELECT count(*)::int FROM jobs WHERE account_id = ${accountId}
               AND kind = ANY(${`{${jobKinds.join(",")}}`}::text[]) AND status IN ('queued', 'running')) AS pending`
      return rows[0]!
    }, Effect.orDie)

    /** Accounts with spans that have no vector from this embedder (whose re-embedding is due). */
    const accountsWithStale = Effect.fn("SpanIndex.accountsWithStale")(function* (embedder: string) {
      const rows = yield* sql<{ account_id: AccountId }>`
          SELECT DISTINCT s.account_id FROM spans s
          LEFT JOIN span_embeddings e ON e.trace_id = s.trace_id AND e.span_id = s.id
                 AND e.embedder_id IN (SELECT id FROM search_embedders WHERE name = ${embedder})
          WHERE e.span_id IS NULL`
      return rows.map((r) => r.account_id)
    }, Effect.orDie)

    const mode = setup.pipe(Effect.map((s) => s.mode))
    return {
      mode,
      ensureIndex,
      pendingOfTraces,
      pendingOfAccount,
      syncFilters,
      store,
      search,
      stats,
      accountsWithStale
    } as const
  })
}) {}
