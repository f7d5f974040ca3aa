import { Tapedeck } from "../index.ts"

Tapedeck.main(Tapedeck.server)
