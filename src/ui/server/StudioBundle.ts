import { createHash } from "node:crypto"
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root (this file is src/ui/server/StudioBundle.ts). */
const ROOT = fileURLToPath(new URL("../../../", import.meta.url))
/** The browser entries: the app, and the small script that sends the page's first API request before it. */
const ENTRY = join(ROOT, "src/ui/app/main.tsx")
const PREFETCH_ENTRY = join(ROOT, "src/ui/app/prefetch.ts")
/** Where built bundles live: a folder per input fingerprint, so a stale one is never served. */
export const BUILD_DIR = join(ROOT, ".tapedeck/ui")
/** Everything the bundle is made from: the browser code, the contract and its schemas, and the locked packages. */
const INPUT_DIRS = ["src/ui/app", "src/api", "src/domain"].map((dir) => join(ROOT, dir))
const INPUT_FILES = ["package-lock.json", "package.json"].map((file) => join(ROOT, file))

/** One built file, ready to serve. */
export interface StudioAsset {
  readonly body: Uint8Array
  /** The body gzipped, compressed on first use (a server that never serves the UI, a test's, never pays for it). */
  readonly gzip: () => Uint8Array
  readonly contentType: string
}

/** A built Studio: its hashed assets by name, and the HTML shell that loads them. */
export interface StudioBundle {
  readonly fingerprint: string
  readonly assets: ReadonlyMap<string, StudioAsset>
  readonly html: string
  /** The entries' script and style names (the first-load assets). */
  readonly entry: { readonly script: string; readonly prefetch: string; readonly styles: ReadonlyArray<string> }
}

interface Manifest {
  readonly fingerprint: string
  readonly script: string
  readonly prefetch: string
  readonly styles: ReadonlyArray<string>
  readonly files: ReadonlyArray<string>
}

const listFiles = async (dir: string): Promise<Array<string>> => {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
  const nested = await Promise.all(
    entries.map((entry) => {
      const path = join(dir, entry.name)
      return entry.isDirectory() ? listFiles(path) : Promise.resolve([path])
    })
  )
  return nested.flat()
}

/**
 * A digest of the inputs' paths, sizes and modification times: cheap enough to take at every start, and any edit,
 * added file or package change moves it.
 */
export const inputFingerprint = async (): Promise<string> => {
  const files = (await Promise.all(INPUT_DIRS.map(listFiles))).flat().concat(INPUT_FILES).sort()
  const hash = createHash("sha256")
  for (const file of files) {
    const info = await stat(file).catch(() => undefined)
    hash.update(`${relative(ROOT, file)}\0${info?.size ?? -1}\0${info?.mtimeMs ?? -1}\n`)
  }
  return hash.digest("hex").slice(0, 16)
}

const CONTENT_TYPES: Record<string, string> = {
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  map: "application/json; charset=utf-8",
  svg: "image/svg+xml"
}
const contentType = (name: string) => CONTENT_TYPES[name.slice(name.lastIndexOf(".") + 1)] ?? "application/octet-stream"

/** The page every /ui route answers: the router in the bundle reads the URL. */
const shellHtml = (script: string, prefetch: string, styles: ReadonlyArray<string>) =>
  [
    "<!doctype html>",
    `<html lang="en">`,
    "<head>",
    `<meta charset="utf-8">`,
    `<meta name="viewport" content="width=device-width, initial-scale=1">`,
    `<meta name="color-scheme" content="light dark">`,
    "<title>Tapedeck Studio</title>",
    // No favicon yet: an empty one keeps the browser from asking for /favicon.ico.
    `<link rel="icon" href="data:,">`,
    ...styles.map((style) => `<link rel="stylesheet" href="/ui/assets/${style}">`),
    // Module scripts run in document order: the prefetch first, while the app is still being evaluated.
    `<script type="module" src="/ui/assets/${prefetch}"></script>`,
    `<script type="module" src="/ui/assets/${script}"></script>`,
    "</head>",
    `<body><div id="root"></div><noscript>Tapedeck Studio needs JavaScript.</noscript></body>`,
    "</html>"
  ].join("\n")

const load = async (dir: string, manifest: Manifest): Promise<StudioBundle> => {
  const assets = new Map<string, StudioAsset>()
  for (const name of manifest.files) {
    const body = new Uint8Array(await readFile(join(dir, name)))
    let gzipped: Uint8Array | undefined
    assets.set(name, {
      body,
      gzip: () => (gzipped ??= Bun.gzipSync(body, { level: 9 })),
      contentType: contentType(name)
    })
  }
  return {
    fingerprint: manifest.fingerprint,
    assets,
    html: shellHtml(manifest.script, manifest.prefetch, manifest.styles),
    entry: { script: manifest.script, prefetch: manifest.prefetch, styles: manifest.styles }
  }
}

const readManifest = async (dir: string): Promise<Manifest | undefined> => {
  try {
    return JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest
  } catch {
    return undefined
  }
}

/** Runs Bun's bundler into a scratch folder, then moves it in place whole (two processes may build at once). */
const build = async (fingerprint: string, dir: string): Promise<Manifest> => {
  const scratch = `${dir}.tmp-${process.pid}-${Date.now()}`
  const result = await Bun.build({
    entrypoints: [ENTRY, PREFETCH_ENTRY],
    outdir: scratch,
    target: "browser",
    format: "esm",
    splitting: true,
    minify: true,
    sourcemap: "none",
    naming: { entry: "[name]-[hash].[ext]", chunk: "chunk-[hash].[ext]", asset: "[name]-[hash].[ext]" },
    define: { "process.env.NODE_ENV": JSON.stringify("production") }
  })
  if (!result.success) {
    await rm(scratch, { recursive: true, force: true })
    throw new Error(`Studio bundle failed:\n${result.logs.map((log) => String(log)).join("\n")}`)
  }
  const files = result.outputs.map((output) => relative(scratch, output.path))
  const entryNamed = (name: string) => {
    const output = result.outputs.find(
      (o) => o.kind === "entry-point" && relative(scratch, o.path).startsWith(`${name}-`)
    )
    if (output === undefined) throw new Error(`Studio bundle has no ${name} entry point`)
    return relative(scratch, output.path)
  }
  const manifest: Manifest = {
    fingerprint,
    script: entryNamed("main"),
    prefetch: entryNamed("prefetch"),
    styles: files.filter((file) => file.endsWith(".css")),
    files
  }
  await writeFile(join(scratch, "manifest.json"), JSON.stringify(manifest, null, 2))
  await mkdir(dirname(dir), { recursive: true })
  await rename(scratch, dir).catch(async (error: NodeJS.ErrnoException) => {
    // Another process finished the same fingerprint first: its copy is as good as ours.
    await rm(scratch, { recursive: true, force: true })
    if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error
  })
  return manifest
}

/** The Studio bundle for the current sources: reused when its fingerprint matches, else built (and old ones removed). */
export const loadOrBuildStudio = async (options: { readonly force?: boolean } = {}): Promise<StudioBundle> => {
  const fingerprint = await inputFingerprint()
  const dir = join(BUILD_DIR, fingerprint)
  const existing = options.force ? undefined : await readManifest(dir)
  if (existing !== undefined && existing.fingerprint === fingerprint) return load(dir, existing)
  if (options.force) await rm(dir, { recursive: true, force: true })
  const manifest = await build(fingerprint, dir)
  const built = (await readManifest(dir)) ?? manifest
  // Older builds are left by edits; keep only this one (a concurrent process may still be reading another: its
  // assets are in memory once loaded).
  for (const entry of await readdir(BUILD_DIR).catch(() => [])) {
    if (entry !== fingerprint && !entry.includes(".tmp-"))
      await rm(join(BUILD_DIR, entry), { recursive: true, force: true })
  }
  return load(dir, built)
}
