import { Layer } from "effect"
import { EmbedderLive } from "./OpenAiEmbedder.ts"
import { Search } from "./Search.ts"
import { SpanIndex } from "./SpanIndex.ts"

/** The embedder chosen by configuration and the span index: one instance each per application (memoised). */
export const SearchDependenciesLive = Layer.mergeAll(EmbedderLive, SpanIndex.Default)

/** The search service over them. */
export const SearchLive = Search.Default.pipe(Layer.provide(SearchDependenciesLive))
