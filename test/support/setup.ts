import { setDefaultTimeout } from "bun:test"

// Bun 1.4 applies this only to the first test file of a run; `npm test` passes `--timeout 60000` for all of them.
setDefaultTimeout(60_000)
