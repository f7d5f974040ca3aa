import { loadOrBuildStudio } from "./StudioBundle.ts"

/** `npm run build`: bundles Tapedeck Studio (the server also does this at start when missing or stale). */
const studio = await loadOrBuildStudio({ force: process.argv.includes("--force") })
const firstLoad = [studio.entry.script, studio.entry.prefetch, ...studio.entry.styles]
let raw = 0
let gzip = 0
for (const [name, asset] of studio.assets) {
  console.log(
    `${name.padEnd(40)} ${(asset.body.length / 1024).toFixed(1).padStart(8)} KB ${(asset.gzip().length / 1024).toFixed(1).padStart(8)} KB gzip`
  )
  if (firstLoad.includes(name)) {
    raw += asset.body.length
    gzip += asset.gzip().length
  }
}
console.log(
  `first load: ${(raw / 1024).toFixed(1)} KB, ${(gzip / 1024).toFixed(1)} KB gzip (fingerprint ${studio.fingerprint})`
)
