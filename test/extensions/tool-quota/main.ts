import { Tapedeck } from "tapedeck"
import { ToolQuotaLive } from "./ToolQuota.ts"

Tapedeck.main(Tapedeck.server.pipe(Tapedeck.extend(ToolQuotaLive)))
