// A team's server: Tapedeck with the redactor installed, run as `npx bun test/extensions/pii-redactor/main.ts`.
import { Tapedeck } from "tapedeck"
import { PiiRedactorLive } from "./Redactor.ts"

Tapedeck.main(Tapedeck.server.pipe(Tapedeck.extend(PiiRedactorLive)))
