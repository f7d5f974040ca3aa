// Builds the publishable SDK package into dist/sdk (git-ignored): ES modules and CommonJS, each with type
// declarations, plus the package's own package.json and README. Publish with `npm publish dist/sdk`.
// Plain Node (no Bun), so the package can be built wherever npm runs.
import { execFileSync } from "node:child_process"
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const sdk = join(root, "src", "sdk")
const out = join(root, "dist", "sdk")
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")

rmSync(out, { recursive: true, force: true })
for (const config of ["tsconfig.esm.json", "tsconfig.cjs.json"]) {
  execFileSync(process.execPath, [tsc, "-p", join(sdk, config)], { stdio: "inherit" })
}
// tsc rewrites the sources' "./X.ts" imports to "./X.js" but leaves them in declarations, where a consumer's
// resolver would look for a .ts file the package does not ship.
for (const dir of ["esm", "cjs"]) {
  for (const file of readdirSync(join(out, dir)).filter((f) => f.endsWith(".d.ts"))) {
    const path = join(out, dir, file)
    writeFileSync(path, readFileSync(path, "utf8").replace(/(from\s+["']\.\/[\w.-]+)\.ts(["'])/g, "$1.js$2"))
  }
}
// The package is "type": "module"; this marks the cjs folder's .js files as CommonJS.
writeFileSync(join(out, "cjs", "package.json"), JSON.stringify({ type: "commonjs" }) + "\n")
copyFileSync(join(sdk, "package.json"), join(out, "package.json"))
copyFileSync(join(sdk, "README.md"), join(out, "README.md"))
console.log(`built ${out}`)
