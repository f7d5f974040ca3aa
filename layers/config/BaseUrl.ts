import { Config, Option } from "effect"

/**
 * An optional http(s) base URL from the environment, trimmed and without trailing slashes; unset or blank is none.
 * Validated first: a validation after Config.map or Config.option loses the variable's name in the error.
 */
export const optionalBaseUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: "must be an http(s) URL such as http://host:port/v1",
      validation: (raw) => raw.trim() === "" || /^https?:$/.test(URL.parse(raw.trim())?.protocol ?? "")
    }),
    Config.map((url) => url.trim().replace(/\/+$/, "")),
    Config.option,
    Config.map(Option.filter((url) => url !== ""))
  )
