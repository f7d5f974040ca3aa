/**
 * The README's quickstart as data: the fenced blocks between `<!-- quickstart -->` and `<!-- /quickstart -->`,
 * so a test can run exactly what a newcomer copies.
 */
export interface Block {
  readonly lang: string
  readonly body: string
}

export const quickstartBlocks = (readme: string): ReadonlyArray<Block> => {
  const start = readme.indexOf("<!-- quickstart -->")
  const end = readme.indexOf("<!-- /quickstart -->")
  if (start < 0 || end < start) throw new Error("README.md has no <!-- quickstart --> … <!-- /quickstart --> section")
  const section = readme.slice(start, end)
  const blocks: Array<Block> = []
  const fence = /^```(\w*)\n([\s\S]*?)^```$/gm
  for (let m = fence.exec(section); m !== null; m = fence.exec(section)) blocks.push({ lang: m[1]!, body: m[2]! })
  return blocks
}

/**
 * A shell block's expected output: the `# …` comment lines after its last command. `…` stands for any text;
 * the literal pieces between must appear in the output in order.
 */
export const expectedOutput = (block: string): ReadonlyArray<string> => {
  const lines = block.trimEnd().split("\n")
  const expected: Array<string> = []
  for (let i = lines.length - 1; i >= 0 && lines[i]!.startsWith("# "); i--) expected.unshift(lines[i]!.slice(2))
  return expected
}

/** Whether `output` holds the literal pieces of `pattern` (split at `…`) in order. */
export const matchesPattern = (output: string, pattern: string): boolean => {
  let at = 0
  for (const piece of pattern.split("…")) {
    if (piece === "") continue
    const found = output.indexOf(piece, at)
    if (found < 0) return false
    at = found + piece.length
  }
  return true
}
