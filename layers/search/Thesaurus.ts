import { chunkMemo, chunkWords } from "./Tokenize.ts"

/**
 * A small thesaurus of how agent runs talk about the same thing in different words (operations, errors, auth,
 * payments, bookings, messaging, code, data). General-purpose word vectors place many of these apart ("book"
 * is near "novel", "deadlock" near "negotiations"); a word found here also contributes its group's first word,
 * to the embedding and to the full-text vector alike, on the query side and the span side. Words are matched
 * lowercased and whole (after identifiers are split), or by the listed prefix when they end with "*".
 */
export const GROUPS: ReadonlyArray<ReadonlyArray<string>> = [
  ["timeout", "timeouts", "timed", "etimedout", "deadline", "deadlines", "slow", "latency", "hang", "hung", "unresponsive", "stalled"],
  ["giveup", "gave", "giving", "abandon*", "aborted", "abort", "quit", "stopped", "cancelled", "canceled"],
  ["retry", "retries", "retried", "retrying", "attempt", "attempts", "backoff", "reattempt"],
  ["auth", "authentication", "authenticate", "authenticated", "login", "logged", "logging", "signin", "sign", "credential*", "password*", "passphrase"],
  ["unauthorized", "unauthorised", "401", "forbidden", "403", "denied", "permission*", "privilege*", "scope", "access", "authori*", "allowed", "entitled"],
  ["token", "tokens", "jwt", "bearer", "oauth", "session", "sessions", "apikey"],
  ["expired", "expiry", "expiration", "expires", "expire", "stale", "outdated", "exp"],
  ["payment", "payments", "pay", "paid", "charge", "charged", "charges", "billing", "billed", "bill", "invoice*", "checkout", "transaction", "purchase"],
  ["card", "cards", "visa", "mastercard", "amex", "issuer", "bank"],
  ["declined", "decline", "rejected", "refused", "insufficient", "bounced", "failed"],
  ["refund", "refunds", "refunded", "reimburse*", "chargeback", "reversed", "reversal", "credited", "money"],
  ["subscription", "subscriptions", "plan", "monthly", "annual", "recurring", "renewal"],
  ["booking", "book", "booked", "reserve", "reserved", "reservation", "reservations", "confirmation", "pnr"],
  ["flight", "flights", "airline", "airlines", "plane", "fly", "flying", "airport", "fare", "cabin", "seat"],
  ["hotel", "hotels", "room", "rooms", "stay", "overnight", "nights", "lodging", "accommodation", "inn", "checkin"],
  ["car", "cars", "rental", "rent", "rented", "hire", "vehicle", "pickup"],
  ["trip", "trips", "travel", "vacation", "holiday", "holidays", "itinerary", "itineraries", "tour", "sightseeing", "excursion"],
  ["code", "coding", "codegen", "implement*", "function", "functions", "program", "programming", "script", "source", "def", "python", "typescript", "javascript"],
  ["sort", "sorting", "sorted", "quicksort", "mergesort", "heapsort", "algorithm"],
  ["test", "tests", "testing", "unittest", "pytest", "assert", "assertion*", "suite", "regression"],
  ["bug", "bugs", "debug", "debugging", "crash", "crashes", "crashed", "exception", "exceptions", "traceback", "stacktrace", "stack", "error", "errors", "typeerror", "uncaught", "null", "undefined", "nonetype"],
  ["database", "databases", "db", "sql", "postgres", "postgresql", "mysql", "query", "queries", "table", "select"],
  ["deadlock", "deadlocks", "lock", "locks", "locked", "contention", "blocked", "40p01"],
  ["connect", "connection", "connections", "connecting", "econnrefused", "refused", "unreachable", "reach"],
  ["ratelimit", "rate", "throttle", "throttled", "throttling", "429", "quota", "limit", "limits", "exceeded"],
  ["weather", "forecast", "rain", "raining", "rainy", "umbrella", "showers", "drizzle", "temperature", "sunny", "snow", "wind"],
  ["email", "emails", "emailed", "mail", "mailed", "smtp", "inbox", "message", "notify", "notification"],
  ["meeting", "meetings", "calendar", "schedule", "scheduled", "scheduling", "event", "invite", "invitation*", "appointment", "slot", "attendees"],
  ["translate", "translation", "translated", "translating", "localize", "localization", "locale", "language", "languages", "french", "german", "japanese", "spanish"],
  ["summary", "summarize", "summarise", "summarized", "summarised", "tldr", "digest", "condense", "abstract", "highlights", "overview", "report"],
  ["pdf", "document", "documents", "file", "files", "ocr", "scan", "scanned", "parse", "parsing", "extract", "read", "text"],
  ["search", "searched", "searching", "web", "google", "browse", "internet", "lookup", "results"],
  ["memory", "oom", "oomkilled", "heap", "ram", "rss", "leak", "leaks"],
  ["disk", "disks", "storage", "volume", "enospc", "space", "full", "df", "device"],
  ["angry", "furious", "upset", "frustrat*", "complaint", "complain*", "unacceptable", "escalate*", "negative", "sorry"],
  ["recipe", "recipes", "cook", "cooking", "dinner", "supper", "meal", "dish", "ingredient*", "curry"],
  ["stock", "stocks", "share", "shares", "ticker", "price", "trading", "market", "nasdaq", "quote"],
  ["package", "parcel", "shipment", "shipping", "shipped", "delivery", "delivered", "tracking", "track", "carrier", "transit"],
  ["reset", "forgot", "forgotten", "recover", "recovery", "unlock", "unlocked"],
  ["json", "malformed", "invalid", "syntaxerror", "jsondecodeerror", "schema", "validation", "parse", "unexpected"],
  ["image", "images", "picture", "illustration", "photo", "render", "rendered", "dalle", "png", "draw", "drawing"],
  ["policy", "moderation", "flagged", "violate*", "violation", "guardrail", "blocked", "unsafe", "safety", "harmful"],
  ["model", "llm", "completion", "completions", "gpt", "claude", "llama", "chat"]
]

const exact = new Map<string, Array<string>>()
const prefixes: Array<[string, string]> = []
for (const group of GROUPS) {
  const head = group[0]!
  for (const word of group) {
    if (word.endsWith("*")) prefixes.push([word.slice(0, -1), head])
    else exact.set(word, [...(exact.get(word) ?? []), head])
  }
}

/** The prefixes by their first char (in their order), so that most words are checked against none. */
const prefixesByFirst = new Map<number, Array<[string, string]>>()
for (const entry of prefixes) {
  const first = entry[0].charCodeAt(0)
  prefixesByFirst.set(first, [...(prefixesByFirst.get(first) ?? []), entry])
}

const NONE: ReadonlyArray<string> = []

/** The group heads a lowercased word belongs to (empty for most words). */
export const conceptsOf = (word: string): ReadonlyArray<string> => {
  const found = exact.get(word) ?? NONE
  const candidates = prefixesByFirst.get(word.charCodeAt(0))
  if (candidates === undefined) return found
  let more: Array<string> | undefined
  for (const [prefix, head] of candidates) {
    if (word.startsWith(prefix)) (more ??= []).push(head)
  }
  return more === undefined ? found : [...new Set([...found, ...more])]
}

/** The heads of the words of one chunk of text (see Tokenize.ts), in order, possibly repeated. */
export const chunkConcepts = (chunk: string, ascii: boolean): ReadonlyArray<string> => {
  let heads: Array<string> | undefined
  chunkWords(chunk, ascii, (word) => {
    for (const head of conceptsOf(word)) (heads ??= []).push(head)
  }, () => {})
  return heads ?? NONE
}

const conceptsOfChunks = chunkMemo(16_384, 48, chunkConcepts)

/** The heads of the groups a text's words belong to, each once, space-separated ("" when none). */
export const conceptText = (text: string) => {
  const heads = new Set<string>()
  conceptsOfChunks(text, (found) => {
    for (let i = 0; i < found.length; i++) heads.add(found[i]!)
  })
  return [...heads].join(" ")
}
