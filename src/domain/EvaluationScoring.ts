/**
 * The arithmetic of evaluations, pure so that property tests can hold it to its documentation:
 * a run's score from its criteria, and a gate's verdict from its runs.
 */

/** A gate regresses when its score is more than this below the baseline runs' mean. */
export const REGRESSION_TOLERANCE = 0.05

/** Comparisons against the threshold and the baseline allow this much floating-point rounding. */
export const SCORE_EPSILON = 1e-9

export interface WeightedScore {
  readonly weight: number
  readonly score: number
}

/** Rounded to 12 decimals (float noise such as 0.8999999999999999 goes) and kept in [0, 1]. */
const clamp01 = (n: number) => Math.min(1, Math.max(0, Math.round(n * 1e12) / 1e12))

/** The arithmetic mean; 0 for no values. */
export const mean = (values: ReadonlyArray<number>) =>
  values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length

/**
 * A run's score: Σ weightᵢ·scoreᵢ / Σ weightᵢ over the criteria (criteria with weight 0 count for nothing);
 * when every weight is 0, the plain mean of the scores. Scores are in [0, 1], and so is the result.
 */
export const weightedScore = (criteria: ReadonlyArray<WeightedScore>): number => {
  if (criteria.length === 0) return 0
  let weights = 0
  let sum = 0
  for (const c of criteria) {
    weights += c.weight
    sum += c.weight * c.score
  }
  return clamp01(weights > 0 ? sum / weights : mean(criteria.map((c) => c.score)))
}

export interface GateInput {
  /** One entry per trace: the run's score, or null when the trace could not be judged. */
  readonly scores: ReadonlyArray<number | null>
  readonly threshold: number
  readonly failOnRegression: boolean
  /** Scores of the baseline runs; undefined or empty for no baseline. */
  readonly baseline?: ReadonlyArray<number> | undefined
  readonly tolerance?: number
}

export interface GateVerdict {
  readonly passed: boolean
  /** The mean score of the judged traces (0 when none was); a trace that could not be judged is not counted as 0. */
  readonly score: number
  /** How many traces were judged (have a score); the others fail the gate. */
  readonly judged: number
  readonly regression: boolean
  readonly baselineScore: number | undefined
  /** Why the gate failed; empty when it passed. */
  readonly reasons: ReadonlyArray<string>
}

const fmt = (n: number) => String(Math.round(n * 10_000) / 10_000)

/**
 * The gate: passed = every trace judged, and score ≥ threshold, and not (failOnRegression and regression);
 * regression = score < mean(baseline) − tolerance. It fails closed: an unjudged trace fails it, and leaves the
 * score and the regression to the judged traces (it is never counted as a score of 0).
 */
export const gateVerdict = (input: GateInput): GateVerdict => {
  const tolerance = input.tolerance ?? REGRESSION_TOLERANCE
  const judged = input.scores.filter((s): s is number => s !== null)
  const score = clamp01(mean(judged))
  const baselineScore =
    input.baseline !== undefined && input.baseline.length > 0 ? clamp01(mean(input.baseline)) : undefined
  const regression =
    baselineScore !== undefined && judged.length > 0 && score < baselineScore - tolerance - SCORE_EPSILON
  const reasons: Array<string> = []
  const unjudged = input.scores.length - judged.length
  if (unjudged > 0) reasons.push(`${unjudged} of ${input.scores.length} traces could not be judged`)
  if (judged.length > 0 && score < input.threshold - SCORE_EPSILON) {
    reasons.push(`score ${fmt(score)} is below the threshold ${fmt(input.threshold)}`)
  }
  if (regression && input.failOnRegression) {
    reasons.push(`score ${fmt(score)} regressed more than ${fmt(tolerance)} below the baseline ${fmt(baselineScore!)}`)
  }
  if (input.scores.length === 0) reasons.push("no traces")
  return { passed: reasons.length === 0, score, judged: judged.length, regression, baselineScore, reasons }
}
