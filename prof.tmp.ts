import { chromium } from "playwright-core"
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox","--disable-gpu","--disable-quic","--no-first-run","--disable-background-networking","--disable-component-update","--disable-sync"] })
const context = await browser.newContext()
await context.addInitScript(`sessionStorage.setItem("tapedeck.studio.key", "svc_dev_key_acme_0001")`)
const page = await context.newPage()
for (let i = 0; i < 5; i++) {
  await page.goto("http://127.0.0.1:18431/ui/traces", { waitUntil: "commit" })
  const r = await page.evaluate(`new Promise((resolve) => {
    const check = () => document.querySelector("table[aria-label=Traces] tbody tr") ? requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now()))) : requestAnimationFrame(check)
    check()
  })`)
  const entries = await page.evaluate(`JSON.stringify({
    nav: performance.getEntriesByType("navigation").map(e => [e.responseEnd|0, e.domInteractive|0]),
    res: performance.getEntriesByType("resource").map(e => [e.name.slice(-40), e.startTime|0, e.responseEnd|0]),
    marks: performance.getEntriesByType("mark").map(e => [e.name, e.startTime|0])
  })`)
  console.log(Math.round(r as number), entries)
}
await browser.close()
