import type { SqlClient, SqlError } from "@effect/sql"
import { Effect } from "effect"
import { packPart, partText, skeletonText } from "./PartPacking.ts"
import { decodeRefs, encodeRefs } from "./PartRefs.ts"

/**
 * A span's payload layout as read for assembly here (every reader puts payloads together in TypeScript, none in SQL):
 * the skeletons and the ids of their parts (as stored: PartRefs, decoded by `withPayloads`). A trace's spans share most of
 * their parts (each model call repeats the conversation so far), so fetching each part once and putting the payloads
 * together here moves far fewer bytes than assembling every payload in PostgreSQL.
 */
export const LAYOUT_SELECT = "input_skel, input_refs, output_skel, output_refs"

export interface LayoutRow {
  readonly input: string | null
  readonly output: string | null
  readonly input_skel: string | null
  readonly input_refs: string | null
  readonly output_skel: string | null
  readonly output_refs: string | null
}

/** The skeleton's text (stored plain or packed) with each \x01 replaced by its part, in order. */
export const assemble = (skel: string, refs: ReadonlyArray<string>, bodies: ReadonlyMap<string, string>) => {
  const pieces = skeletonText(skel).split("\x01")
  let text = pieces[0]!
  for (let i = 1; i < pieces.length; i++) {
    const body = bodies.get(refs[i - 1]!)
    if (body === undefined) throw new Error(`shared span content ${refs[i - 1]} is missing`)
    text += body + pieces[i]!
  }
  return text
}

/**
 * The texts of parts read lately, by id, least recently used first: a part's text never changes under its id (parts
 * are inserted, marked, unmarked and deleted, never rewritten, and ids come from a sequence), so a text read once
 * serves every later read until evicted. The spans of a trace share most of their parts, and the same trace is read
 * again and again just after it is written (search indexing, the live stream, the trace's detail): the parts are then
 * neither fetched again nor inflated again (PartPacking). Filled by reads and by the writes that resolve parts
 * (`withResolvedParts`). One per database client, bounded by its characters.
 */
export class PartTexts {
  private readonly texts = new Map<string, string>()
  private chars = 0

  constructor(private readonly capacity: number) {}

  readonly get = (id: string): string | undefined => {
    const text = this.texts.get(id)
    if (text !== undefined) {
      this.texts.delete(id)
      this.texts.set(id, text)
    }
    return text
  }

  readonly set = (id: string, text: string) => {
    if (text.length > this.capacity / 16 || this.texts.has(id)) return
    this.texts.set(id, text)
    this.chars += text.length
    for (const [oldest, t] of this.texts) {
      if (this.chars <= this.capacity) break
      this.texts.delete(oldest)
      this.chars -= t.length
    }
  }
}

/** Characters of part texts kept per database client (PartTexts): about 8 MB of mostly ASCII JSON. */
const PART_TEXTS_CAPACITY = 8_000_000
const partTexts = new WeakMap<SqlClient.SqlClient, PartTexts>()

const partTextsOf = (sql: SqlClient.SqlClient) => {
  let cache = partTexts.get(sql)
  if (cache === undefined) {
    cache = new PartTexts(PART_TEXTS_CAPACITY)
    partTexts.set(sql, cache)
  }
  return cache
}

/**
 * The rows with `input` and `output` as the payloads' JSON text whatever their layout: the parts of all the rows
 * not read lately are read in one query, each once, and those stored compressed inflated (PartPacking).
 */
export const withPayloads = <R extends LayoutRow>(sql: SqlClient.SqlClient, rows: ReadonlyArray<R>) =>
  Effect.gen(function* () {
    const cache = partTextsOf(sql)
    const bodies = new Map<string, string>()
    const missing: Array<string> = []
    const want = (id: string) => {
      if (bodies.has(id)) return
      const text = cache.get(id)
      if (text === undefined) missing.push(id)
      bodies.set(id, text ?? "")
    }
    const refs = rows.map((row) => ({
      input: row.input_refs === null ? [] : decodeRefs(row.input_refs),
      output: row.output_refs === null ? [] : decodeRefs(row.output_refs)
    }))
    for (const r of refs) {
      for (const id of r.input) want(id)
      for (const id of r.output) want(id)
    }
    if (bodies.size === 0) return rows
    if (missing.length > 0) {
      const parts = yield* sql<{ id: string; body: string | null; packed: Uint8Array | null }>`
        SELECT id::text AS id, body, packed FROM span_contents WHERE id = ANY(${`{${missing.join(",")}}`}::bigint[])`
      for (const id of missing) bodies.delete(id)
      for (const p of parts) {
        const text = partText(p.body, p.packed)
        bodies.set(p.id, text)
        cache.set(p.id, text)
      }
    }
    return rows.map((row, i) =>
      row.input_skel === null && row.output_skel === null
        ? row
        : {
            ...row,
            input: row.input_skel === null ? row.input : assemble(row.input_skel, refs[i]!.input, bodies),
            output: row.output_skel === null ? row.output : assemble(row.output_skel, refs[i]!.output, bodies)
          }
    )
  })

interface SplitRecord {
  readonly input_parts?: ReadonlyArray<string | null>
  readonly input_hashes?: ReadonlyArray<string>
  readonly output_parts?: ReadonlyArray<string | null>
  readonly output_hashes?: ReadonlyArray<string>
}

/**
 * Writes records of split spans (toWriteRecord's) with their parts resolved to ids first, once per distinct part of
 * the batch: `tapedeck_share_parts` called once for the whole batch in the same transaction as the write, instead of
 * by the trigger for every span (a model call repeats its whole history: a 30-step run made ~930 lookups for ~90
 * distinct parts). The records then carry `input_refs`/`output_refs`, which the trigger keeps as given. Parts whose
 * text is sent are sent compressed where that pays (PartPacking; the ones the database already has are not stored
 * again, and those the writer knows are stored are sent by hash only, so what is compressed is mostly what is new),
 * compressed before the transaction begins, so no connection waits on it. A batch with nothing split is written as
 * it is, in one statement. A part sent by hash only that is not stored fails the call (TD001) and the transaction
 * with it, as the trigger would.
 */
export const withResolvedParts = <A>(
  sql: SqlClient.SqlClient,
  accountId: string,
  records: ReadonlyArray<object>,
  write: (recordsJson: string) => Effect.Effect<A, SqlError.SqlError>
): Effect.Effect<A, SqlError.SqlError> => {
  const texts = new Map<string, string | null>()
  const collect = (hashes: ReadonlyArray<string> | undefined, parts: ReadonlyArray<string | null> | undefined) => {
    if (hashes === undefined) return
    for (let i = 0; i < hashes.length; i++) {
      const text = parts?.[i] ?? null
      if (text !== null || !texts.has(hashes[i]!)) texts.set(hashes[i]!, text)
    }
  }
  for (const record of records) {
    const r = record as SplitRecord
    collect(r.input_hashes, r.input_parts)
    collect(r.output_hashes, r.output_parts)
  }
  if (texts.size === 0) return write(JSON.stringify(records))
  const hashes = [...texts.keys()]
  const plain: Array<string | null> = []
  const packed: Array<string | null> = []
  for (const text of texts.values()) {
    const bytes = text === null ? undefined : packPart(text)
    plain.push(bytes === undefined ? text : null)
    packed.push(bytes === undefined ? null : bytes.toString("base64"))
  }
  return sql.withTransaction(
    Effect.gen(function* () {
      const [row] = yield* sql<{ ids: ReadonlyArray<string> }>`
        SELECT tapedeck_share_parts(
          ${accountId}::uuid,
          ARRAY(SELECT t FROM json_array_elements_text(${JSON.stringify(plain)}::json) WITH ORDINALITY AS e(t, i) ORDER BY i),
          ${`{${hashes.join(",")}}`}::text[],
          ARRAY(SELECT decode(t, 'base64') FROM json_array_elements_text(${JSON.stringify(packed)}::json) WITH ORDINALITY AS e(t, i) ORDER BY i)
        )::text[] AS ids`
      const ids = new Map(hashes.map((h, i) => [h, row!.ids[i]!]))
      // What is written is read next (search indexing, the stream, the detail): the texts sent are kept, so that
      // reads neither fetch nor inflate them. Kept even if the transaction rolls back: an id is never reused.
      const cache = partTextsOf(sql)
      for (let i = 0; i < hashes.length; i++) {
        const text = texts.get(hashes[i]!)
        if (text != null) cache.set(row!.ids[i]!, text)
      }
      const refs = (hs: ReadonlyArray<string> | undefined) =>
        hs === undefined ? undefined : encodeRefs(hs.map((h) => ids.get(h)!))
      const resolved = (records as ReadonlyArray<SplitRecord>).map((r) =>
        r.input_hashes === undefined && r.output_hashes === undefined
          ? r
          : {
              ...r,
              input_parts: undefined,
              input_hashes: undefined,
              input_refs: refs(r.input_hashes),
              output_parts: undefined,
              output_hashes: undefined,
              output_refs: refs(r.output_hashes)
            }
      )
      return yield* write(JSON.stringify(resolved))
    })
  )
}
