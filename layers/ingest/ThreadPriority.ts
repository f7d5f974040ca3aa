import { readlinkSync } from "node:fs"
import { setPriority } from "node:os"

/**
 * Gives the calling thread (not its process) the nice value `nice`, on Linux, where a thread has an id of its own
 * (`/proc/thread-self` names it) and setpriority(2) applies to that thread alone. A background thread so lowered
 * does not take the core from the request thread when the cores are all busy, nor when a message wakes it. Elsewhere,
 * or when refused, the thread is left as it is: this is a preference, never a requirement. Whether it was applied.
 */
export const lowerThreadPriority = (nice: number): boolean => {
  try {
    const threadId = Number(readlinkSync("/proc/thread-self").split("/").at(-1))
    if (!Number.isInteger(threadId) || threadId <= 0) return false
    setPriority(threadId, nice)
    return true
  } catch {
    return false
  }
}
