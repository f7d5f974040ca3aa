export const uuid = () => crypto.randomUUID()

export const span = (overrides: Record<string, unknown> = {}) => ({
  id: uuid(),
  parent_id: null,
  span_type: "llm_call",
  name: "step",
  started_at: "2026-01-01T00:00:00.000Z",
  ...overrides
})

export const trace = (overrides: Record<string, unknown> = {}) => ({
  id: uuid(),
  started_at: "2026-01-01T00:00:00.000Z",
  ...overrides
})
