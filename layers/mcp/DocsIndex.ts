/** One readable unit of the API reference: an operation, a schema, or a section of the guides (README.md, docs/). */
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

/** A guide page: its name ("readme", "stream" for docs/stream.md) and its Markdown. */
export interface GuidePage {
  readonly name: string
  readonly markdown: string
}

/** A page's sections (## and ###), each with its own text (a ## section stops at its first ###). */
const guideEntries = (page: GuidePage): Array<DocEntry> => {
  const out: Array<DocEntry> = []
  let current: { title: string; lines: Array<string> } | undefined
  let inFence = false
  const flush = () => {
    if (current) {
      out.push({ id: `guide:${page.name}/${slug(current.title)}`, title: current.title, kind: "guide", text: current.lines.join("\n").trim() })
    }
  }
  for (const line of page.markdown.split("\n")) {
    if (line.startsWith("```")) inFence = !inFence
    const heading = inFence ? null : /^(#{2,3}) (.+)$/.exec(line)
    if (heading) {
      flush()
      current = { title: heading[2]!.trim(), lines: [line] }
    } else if (current) current.lines.push(line)
  }
  flush()
  return out
}

const words = (s: string) => s.toLowerCase().match(/[a-z0-9_]+/g) ?? []

/** Builds the searchable reference from the OpenAPI document and the guide pages. */
export const makeDocsIndex = (openApi: unknown, guides: ReadonlyArray<GuidePage>): DocsIndex => {
  const entries = [...operationEntries(openApi), ...guides.flatMap(guideEntries), ...schemaEntries(openApi)]
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
    // A guide section by title, or by the start of its id after the page ("guide:stream/live-span-stream" or
    // "live-span-stream").
    const key = slug(lower.startsWith("guide:") ? wanted.slice(6).replace(/^[^/]*\//, "") : wanted)
    const sectionKey = (e: DocEntry) => e.id.replace(/^guide:[^/]*\//, "")
    const sections = entries.filter((e) => e.kind === "guide" && (e.title.toLowerCase() === lower || (key !== "" && sectionKey(e).startsWith(key))))
    const exactSection = sections.filter((e) => sectionKey(e) === key)
    return exactSection.length > 0 ? exactSection : sections
  }

  return { entries, search, read }
}
