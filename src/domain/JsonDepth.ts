/** How deeply a request body may nest; deeper ones would overflow the stack of whatever walks them next. */
export const MAX_BODY_DEPTH = 100

/**
 * Whether `value` nests deeper than `max` arrays and objects. Recursive, but never more than `max` calls deep
 * whatever the input, and without allocating: every JSON body passes through here.
 */
export const nestsDeeperThan = (value: unknown, max: number, depth = 0): boolean => {
  if (value === null || typeof value !== "object") return false
  if (depth >= max) return true
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (nestsDeeperThan(value[i], max, depth + 1)) return true
    return false
  }
  for (const key in value) if (nestsDeeperThan((value as Record<string, unknown>)[key], max, depth + 1)) return true
  return false
}
