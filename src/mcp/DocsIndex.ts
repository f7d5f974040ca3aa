/** One readable unit of the API reference: an operation, a schema, or a section of the guide (README.md, docs/). */
export interface DocEntry {
  readonly id: string
  readonly title: string
  readonly kind: "operation" | "schema" | "guide"
  readonly text: string
}

export interface DocsIndex {
  readonly entries: ReadonlyArray<DocEntry>
  readonly search: (query: string, limit: number) => ReadonlyArray<{ id: string; title: string; kind: string; score: number; snippet: string }>
  readonly read: (idOrPath: string) => ReadonlyArray<DocEntry>
}

const METHODS = ["get", "post", "put", "patch", "delete"] as const

const slug = (s: string) => s.toLowerCase().replace(/[`'"]/g, "").replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "")

const refName = (ref: string) => ref.split("/").at(-1) ?? ref

/** A JSON schema with `$ref`s shown as the referenced schema's name (read it with read_doc("schema:Name")). */
const schemaText = (schema: unknown) =>
  JSON.stringify(schema, (key, value) => (key === "$ref" && typeof value === "string" ? `schema:${refName(value)}` : value), 2)

const operationEntries = (openApi: any): Array<DocEntry> => {
  const out: Array<DocEntry> = []
  for (const [path, item] of Object.entries<any>(openApi.paths ?? {})) {
    for (const method of METHODS) {
      const op = item?.[method]
      if (!op) continue
      const id = `${method.toUpperCase()} ${path}`
      const lines = [`# ${id}`]
      if (op.summary) lines.push(op.summary)
      if (op.description) lines.push(op.description)
      if (op.tags?.length) lines.push(`Group: ${op.tags.join(", ")}`)
      if (op.security?.length === 0) lines.push("Authentication: none")
      else lines.push("Authentication: x-service-key header or Authorization: Bearer (API key or JWT)")
      const params = (op.parameters ?? []) as Array<any>
      if (params.length > 0) {
        lines.push("Parameters:")
        for (const p of params) {
          lines.push(`- ${p.name} (${p.in}${p.required ? ", required" : ""}): ${JSON.stringify(p.schema ?? {})}${p.description ? ` ${p.description}` : ""}`)
        }
      }
      const body = op.requestBody?.content
      if (body) {
        for (const [type, media] of Object.entries<any>(body)) {
          lines.push(`Request body (${type}):`, schemaText(media.schema ?? {}))
        }
      }
      lines.push("Responses:")
      for (const [status, response] of Object.entries<any>(op.responses ?? {})) {
        const schema = response?.content?.["application/json"]?.schema
        lines.push(`- ${status}: ${response?.description ?? ""}${schema ? ` ${schemaText(schema).replace(/\s+/g, " ")}` : ""}`)
      }
      out.push({ id, title: op.summary ? `${id}: ${op.summary}` : id, kind: "operation", text: lines.join("\n") })
    }
  }
  return out
}

const schemaEntries = (openApi: any): Array<DocEntry> =>
  Object.entries<any>(openApi.components?.schemas ?? {}).map(([name, schema]) => ({
    id: `schema:${name}`,
    title: `Schema ${name}`,
    kind: "schema" as const,
    text: `# Schema ${name}\n${schema?.description ? `${schema.description}\n` : ""}${schemaText(schema)}`
  }))

/** Guide sections (## and ###), each with its own text (a ## section stops at its first ###). Ids keep the `readme:` prefix. */
const readmeEntries = (readme: string): Array<DocEntry> => {
  const out: Array<DocEntry> = []
  let current: { title: string; lines: Array<string> } | undefined
  let inFence = false
  const flush = () => {
    // A page title (#) directly followed by its first section has no text of its own.
    if (current && current.lines.some((l, i) => i > 0 && l.trim() !== "")) {
      out.push({ id: `readme:${slug(current.title)}`, title: current.title, kind: "guide", text: current.lines.join("\n").trim() })
    }
  }
  for (const line of readme.split("\n")) {
    if (line.startsWith("```")) inFence = !inFence
    // Page titles (#) end the previous page's last section.
    const heading = inFence ? null : /^(#{1,3}) (.+)$/.exec(line)
    if (heading) {
      flush()
      current = { title: heading[2]!.trim(), lines: [line] }
    } else if (current) current.lines.push(line)
  }
  flush()
  return out
}

const words = (s: string) => s.toLowerCase().match(/[a-z0-9_]+/g) ?? []

/** Builds the searchable reference from the OpenAPI document and the guide (README.md and docs/). */
export const makeDocsIndex = (openApi: unknown, readme: string): DocsIndex => {
  const entries = [...operationEntries(openApi), ...readmeEntries(readme), ...schemaEntries(openApi)]
  const tokenized = entries.map((e) => ({ title: words(e.title + " " + e.id), body: words(e.text) }))
  const documentFrequency = new Map<string, number>()
  for (const t of tokenized) for (const w of new Set([...t.title, ...t.body])) documentFrequency.set(w, (documentFrequency.get(w) ?? 0) + 1)

  const search: DocsIndex["search"] = (query, limit) => {
    const terms = [...new Set(words(query))]
    if (terms.length === 0) return []
    const scored = entries.map((entry, i) => {
      const t = tokenized[i]!
      let score = 0
      for (const term of terms) {
        const idf = Math.log(1 + entries.length / (1 + (documentFrequency.get(term) ?? 0)))
        const inTitle = t.title.filter((w) => w === term || (term.length > 3 && w.startsWith(term))).length
        const inBody = t.body.filter((w) => w === term || (term.length > 3 && w.startsWith(term))).length
        score += idf * (3 * Math.min(inTitle, 3) + Math.log(1 + inBody))
      }
      if (entry.id.toLowerCase().includes(query.toLowerCase().trim())) score += 5
      return { entry, score }
    })
    return scored
      .filter((s) => s.score > 0)
      .sort((a, b) => b.score - a.score)
      .slice(0, limit)
      .map(({ entry, score }) => {
        const lower = entry.text.toLowerCase()
        const at = Math.max(0, Math.min(...terms.map((t) => lower.indexOf(t)).filter((i) => i >= 0), entry.text.length) - 60)
        return {
          id: entry.id,
          title: entry.title,
          kind: entry.kind,
          score: Math.round(score * 100) / 100,
          snippet: entry.text.slice(at, at + 240).replace(/\s+/g, " ").trim()
        }
      })
  }

  const read: DocsIndex["read"] = (idOrPath) => {
    const wanted = idOrPath.trim()
    const lower = wanted.toLowerCase()
    const exact = entries.filter((e) => e.id.toLowerCase() === lower)
    if (exact.length > 0) return exact
    // A path without a method: every operation on it.
    const byPath = entries.filter((e) => e.kind === "operation" && e.id.toLowerCase().split(" ")[1] === lower)
    if (byPath.length > 0) return byPath
    const bySchema = entries.filter((e) => e.id.toLowerCase() === `schema:${lower}`)
    if (bySchema.length > 0) return bySchema
    // A README section by title, or by the start of its id ("readme:live-span-stream").
    const key = slug(lower.startsWith("readme:") ? wanted.slice(7) : wanted)
    const sections = entries.filter((e) => e.kind === "guide" && (e.title.toLowerCase() === lower || (key !== "" && e.id.startsWith(`readme:${key}`))))
    const exactSection = sections.filter((e) => e.id === `readme:${key}`)
    return exactSection.length > 0 ? exactSection : sections
  }

  return { entries, search, read }
}
