import { existsSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { join } from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"

/** Debian's chromium: the only browser the tests drive (nothing is downloaded). */
export const CHROMIUM = "/usr/bin/chromium"
export const hasChromium = existsSync(CHROMIUM)

/** Screenshots of the views, kept as test artefacts (git-ignored). */
export const SCREENSHOTS = join(import.meta.dir, "..", "..", ".artifacts", "screenshots")

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"
    ]
  })

/** Opens `path` of the Studio and signs in with `key` through the form, as a person would. */
export const signIn = async (page: Page, baseUrl: string, key: string, path = "/ui") => {
  await page.goto(baseUrl + path)
  await page.getByLabel("API key").fill(key)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
}

export const screenshot = async (page: Page, name: string) => {
  await mkdir(SCREENSHOTS, { recursive: true })
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: false })
}
