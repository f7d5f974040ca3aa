import { startPrefetch } from "./api/prefetch.ts"

// A separate, small entry that runs before the main bundle: the page's first API request is on its way while the
// bundle is parsed and evaluated.
startPrefetch()
