import { existsSync } from "node:fs"
import { mkdirSync } from "node:fs"
import { chromium, type Browser } from "playwright-core"

/** Debian's Chromium: the only browser the Studio's tests and benchmark drive (none is ever downloaded). */
export const CHROMIUM_PATH = "/usr/bin/chromium"
export const hasChromium = existsSync(CHROMIUM_PATH)

/** Chromium headless, quiet: no sandbox (containers), no GPU, nothing fetched in the background. */
export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })

/** Where screenshots of the Studio go (git-ignored test artefacts). */
export const screenshotDir = (name: string) => {
  const dir = `test-results/${name}`
  mkdirSync(dir, { recursive: true })
  return dir
}
