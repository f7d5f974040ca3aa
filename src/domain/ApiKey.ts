import { Schema } from "effect"

export const KEY_PREFIX = "svc_"

/** The part of a key shown in listings: at most 8 characters after `svc_`, and never more than half of the rest. */
export const displayPrefix = (key: string) =>
  key.slice(0, KEY_PREFIX.length + Math.min(8, Math.floor((key.length - KEY_PREFIX.length) / 2)))

export const AccountName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, {
    message: () => "an account name is 1 to 100 letters, digits, '_', '.' or '-', starting with a letter or digit"
  })
)

/** `svc_` followed by at least 4 printable characters, no spaces or commas. */
export const ApiKeyText = Schema.String.pipe(
  Schema.pattern(/^svc_[\x21-\x2b\x2d-\x7e]{4,256}$/, {
    message: () => "an API key is 'svc_' followed by 4 to 256 printable characters (no spaces or commas)"
  })
)
