import { describe, expect, test } from "bun:test"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize } from "node:path"

// The README and docs/ as a newcomer reads them on a fresh clone: short README, links that resolve inside the
// repository, commands that work without a global Bun, and no reference to documents the reader does not have.
const root = new URL("../..", import.meta.url).pathname
const pages = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)]
const text = (page: string) => readFileSync(join(root, page), "utf8")

/** The lines of a page's fenced code blocks and inline code spans: where commands are written. */
const codeOf = (markdown: string): Array<string> => {
  const out: Array<string> = []
  let inFence = false
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) inFence = !inFence
    else if (inFence) out.push(line)
    else for (const m of line.matchAll(/`([^`]+)`/g)) out.push(m[1]!)
  }
  return out
}

/** A command line that runs Bun directly (`bun run …`, `bun test …`, `bun src/…`) instead of through npx or npm. */
const BARE_BUN = /(^|[\s;&|(])bun (run|test|install|x|src\/|test\/)/

describe("README and docs/", () => {
  test("README.md is at most 300 lines and maps every page of docs/", () => {
    const readme = text("README.md")
    expect(readme.split("\n").length).toBeLessThanOrEqual(300)
    for (const page of pages.filter((p) => p !== "README.md")) expect(readme).toContain(`(${page})`)
  })

  test("every relative link resolves to a file inside the repository", () => {
    const broken: Array<string> = []
    for (const page of pages) {
      for (const m of text(page).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split("#")[0]!
        if (target === "" || /^[a-z]+:/i.test(target)) continue
        const resolved = normalize(join(dirname(join(root, page)), target))
        if (!resolved.startsWith(root) || !existsSync(resolved)) broken.push(`${page}: ${m[1]}`)
      }
    }
    expect(broken).toEqual([])
  })

  test("commands use npx bun or npm run, never a bare bun", () => {
    const bare = pages.flatMap((page) =>
      codeOf(text(page)).filter((line) => BARE_BUN.test(line.replaceAll("npx bun", "npx-bun"))).map((line) => `${page}: ${line}`)
    )
    expect(bare).toEqual([])
  })

  test("no reference to documents outside the repository", () => {
    const outside = pages.flatMap((page) =>
      text(page)
        .split("\n")
        .filter((line) => /\.\.\/shared|\/work\/|otel-genai-mapping|\bthe spec\b|\bSPEC\b|§/i.test(line))
        .map((line) => `${page}: ${line}`)
    )
    expect(outside).toEqual([])
  })

  test("the code's messages and comments name no document outside the repository", () => {
    const offenders: Array<string> = []
    const walk = (dir: string) => {
      for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
        const path = `${dir}/${entry.name}`
        if (entry.isDirectory()) {
          if (entry.name !== "proto" && !entry.name.startsWith(".")) walk(path)
        } else if (/\.(ts|tsx)$/.test(entry.name)) {
          readFileSync(join(root, path), "utf8").split("\n").forEach((line, i) => {
            if (/\.\.\/shared|otel-genai-mapping|\bthe spec\b|\bSPEC\b|§\d/.test(line) && !/RFC \d+ §/.test(line)) {
              offenders.push(`${path}:${i + 1}: ${line.trim()}`)
            }
          })
        }
      }
    }
    for (const dir of ["src", "layers", "test"]) walk(dir)
    // (this file names the patterns it looks for)
    offenders.splice(0, offenders.length, ...offenders.filter((o) => !o.startsWith("test/docs/docs-lint.test.ts:")))
    expect(offenders).toEqual([])
  })
  test("the server's and the CLI's own messages give commands that work (npx bun)", () => {
    const offenders: Array<string> = []
    for (const file of ["src/cli.ts", "src/GateCli.ts", "src/app/main.ts", "layers/auth/KeyBootstrap.ts"]) {
      readFileSync(join(root, file), "utf8").split("\n").forEach((line, i) => {
        const code = line.trim()
        if (code.startsWith("//") || code.startsWith("*") || code.startsWith("/*")) return
        if (BARE_BUN.test(code.replaceAll("npx bun", "npx-bun"))) offenders.push(`${file}:${i + 1}: ${code}`)
      })
    }
    expect(offenders).toEqual([])
  })
  test("docs/configuration.md lists every setting the service reads", () => {
    const source = (dir: string): Array<string> =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() ? source(`${dir}/${entry.name}`) : entry.name.endsWith(".ts") ? [readFileSync(join(root, dir, entry.name), "utf8")] : []
      )
    const names = new Set(
      [...source("src"), ...source("layers")].flatMap((code) => [...code.matchAll(/"((?:TAPEDECK|OTEL)_[A-Z0-9_]+|DATABASE_URL)"/g)].map((m) => m[1]!))
    )
    // Set by the worker supervisor for its own children, not by an operator.
    names.delete("TAPEDECK_WORKER_INDEX")
    const table = text("docs/configuration.md")
    expect([...names].filter((name) => !table.includes(`\`${name}\``)).sort()).toEqual([])
    expect(names.size).toBeGreaterThan(50)
  })
})
