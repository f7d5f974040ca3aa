import { setDefaultTimeout } from "bun:test"

setDefaultTimeout(60_000)
