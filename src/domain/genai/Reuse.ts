/**
 * What the mapping of an export's spans hands on from one span to the next. The spans of an export repeat themselves:
 * every model call carries the same tool definitions and the whole history so far. So what was mapped from an
 * attribute's text is kept for the next span with the same text, or, for a history, a longer one (GenAiMessages).
 * Such values end up in more than one span, so they are frozen: no later step can change one span's value through
 * another's. Only where no extension sees the mapped spans (a span processor may change what it is given in place):
 * `mapAll` is told which.
 */
export class ExportMemo {
  private readonly last = new Map<string, { readonly text: string; readonly value: unknown }>()

  /** The text and value last kept as `kind`. */
  lastOf<A>(kind: string): { readonly text: string; readonly value: A } | undefined {
    return this.last.get(kind) as { readonly text: string; readonly value: A } | undefined
  }

  /** Keeps `value` (frozen) as the last `kind`, mapped from `text`. */
  keep<A>(kind: string, text: string, value: A): A {
    this.last.set(kind, { text, value: frozen(value) })
    return value
  }

  /** `compute(text)`, or the value it gave the last time `kind` was asked with the same text. */
  byText<A>(kind: string, text: string, compute: (text: string) => A): A {
    const known = this.lastOf<A>(kind)
    return known !== undefined && known.text === text ? known.value : this.keep(kind, text, compute(text))
  }
}

/** The value frozen, with everything it holds. */
const frozen = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key of Object.keys(value)) frozen((value as Record<string, unknown>)[key])
  }
  return value
}
