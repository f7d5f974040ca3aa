import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { DataDirInUse } from "#src/domain/Errors"

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

const tryCreate = (file: string) => {
  try {
    fs.writeFileSync(file, String(process.pid), { flag: "wx" })
    return true
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false
    throw e
  }
}

/**
 * Holds `<dataDir>/tapedeck.lock` (our pid) for the scope. A lock left by a dead process is taken over,
 * so a crash never locks the user out.
 */
export const holdDataDirLock = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const file = path.join(dataDir, "tapedeck.lock")
      yield* Effect.sync(() => fs.mkdirSync(dataDir, { recursive: true }))
      for (let attempt = 0; attempt < 3; attempt++) {
        if (yield* Effect.sync(() => tryCreate(file))) return file
        const pid = yield* Effect.sync(() => Number.parseInt(fs.readFileSync(file, "utf8"), 10))
        if (Number.isInteger(pid) && pid !== process.pid && isAlive(pid)) {
          return yield* new DataDirInUse({ dataDir, pid })
        }
        yield* Effect.sync(() => fs.rmSync(file, { force: true }))
      }
      return yield* Effect.die(new Error(`could not lock ${file}`))
    }),
    (file) => Effect.sync(() => fs.rmSync(file, { force: true }))
  )
