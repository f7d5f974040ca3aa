import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * A span's payload layout as read for assembly here rather than in SQL (`tapedeck_payload_text`): the skeletons and
 * the ids of their parts (as text, which both drivers return alike). A trace's spans share most of their parts (each
 * model call repeats the conversation so far), so fetching each part once and putting the payloads together here
 * moves far fewer bytes than assembling every payload in PostgreSQL.
 */
export const LAYOUT_SELECT = `input_skel, input_refs::text[] AS input_refs, output_skel, output_refs::text[] AS output_refs`

export interface LayoutRow {
  readonly input: string | null
  readonly output: string | null
  readonly input_skel: string | null
  readonly input_refs: ReadonlyArray<string> | null
  readonly output_skel: string | null
  readonly output_refs: ReadonlyArray<string> | null
}

/** The skeleton's text with each \x01 replaced by its part, in order. */
export const assemble = (skel: string, refs: ReadonlyArray<string>, bodies: ReadonlyMap<string, string>) => {
  const pieces = skel.split("\x01")
  let text = pieces[0]!
  for (let i = 1; i < pieces.length; i++) {
    const body = bodies.get(refs[i - 1]!)
    if (body === undefined) throw new Error(`shared span content ${refs[i - 1]} is missing`)
    text += body + pieces[i]!
  }
  return text
}

/**
 * The rows with `input` and `output` as the payloads' JSON text whatever their layout: the parts of all the rows
 * are read in one query, each once.
 */
export const withPayloads = <R extends LayoutRow>(sql: SqlClient.SqlClient, rows: ReadonlyArray<R>) =>
  Effect.gen(function* () {
    const ids = new Set<string>()
    for (const row of rows) {
      if (row.input_refs !== null) for (const id of row.input_refs) ids.add(id)
      if (row.output_refs !== null) for (const id of row.output_refs) ids.add(id)
    }
    if (ids.size === 0) return rows
    const parts = yield* sql<{ id: string; body: string }>`
      SELECT id::text AS id, body FROM span_contents WHERE id = ANY(${`{${[...ids].join(",")}}`}::bigint[])`
    const bodies = new Map(parts.map((p) => [p.id, p.body]))
    return rows.map((row) =>
      row.input_skel === null && row.output_skel === null
        ? row
        : {
            ...row,
            input: row.input_skel === null ? row.input : assemble(row.input_skel, row.input_refs ?? [], bodies),
            output: row.output_skel === null ? row.output : assemble(row.output_skel, row.output_refs ?? [], bodies)
          }
    )
  })
