/**
 * A span as written: its columns (`fields`, with a split payload's skeleton, parts and hashes), and its input and
 * output as JSON text when stored inline. Each payload is serialized once, for the split's size test and for the
 * statement alike (`recordsJson` puts the text in as it is).
 */
export interface WriteRecord {
  readonly fields: Record<string, unknown>
  readonly input: string | undefined
  readonly output: string | undefined
}

/** The records as one JSON array for `json_to_recordset`: each record's fields, and its payloads' text put in as is. */
export const recordsJson = (records: ReadonlyArray<WriteRecord>) => {
  let json = "["
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!
    const fields = JSON.stringify(r.fields)
    let tail = ""
    if (r.input !== undefined) tail += `,"input":${r.input}`
    if (r.output !== undefined) tail += `,"output":${r.output}`
    if (i > 0) json += ","
    json += fields !== "{}" ? `${fields.slice(0, -1)}${tail}}` : `{${tail.slice(1)}}`
  }
  return `${json}]`
}
