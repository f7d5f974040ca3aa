/** A small WebSocket client for the live span stream tests: collects messages, waits for conditions. */
export interface StreamClient {
  readonly socket: WebSocket
  readonly messages: Array<any>
  readonly events: () => Array<any>
  readonly closed: Promise<{ code: number; reason: string }>
  readonly send: (message: unknown) => void
  readonly waitFor: (predicate: (messages: Array<any>) => boolean, timeoutMs?: number) => Promise<void>
  readonly close: () => void
}

export const wsUrl = (httpUrl: string, path = "/ws/v1/stream") => `${httpUrl.replace(/^http/, "ws")}${path}`

export const connectStream = async (
  url: string,
  options: { headers?: Record<string, string>; open?: boolean } = {}
): Promise<StreamClient> => {
  const socket = new WebSocket(url, { headers: options.headers ?? {} } as never)
  const messages: Array<any> = []
  socket.addEventListener("message", (e) => messages.push(JSON.parse(String(e.data))))
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason }))
  )
  if (options.open !== false) {
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve())
      socket.addEventListener("error", () => reject(new Error("websocket failed to open")))
    })
  }
  const waitFor = async (predicate: (messages: Array<any>) => boolean, timeoutMs = 5000) => {
    const deadline = Date.now() + timeoutMs
    while (!predicate(messages)) {
      if (Date.now() > deadline) throw new Error(`timed out; got ${JSON.stringify(messages).slice(0, 2000)}`)
      await Bun.sleep(10)
    }
  }
  return {
    socket,
    messages,
    // A batching subscriber's frames hold several events each.
    events: () =>
      messages
        .flatMap((m) => (m.type === "batch" ? m.events : [m]))
        .filter((m) => m.type === "span" || m.type === "trace"),
    closed,
    send: (message) => socket.send(typeof message === "string" ? message : JSON.stringify(message)),
    waitFor,
    close: () => socket.close()
  }
}

/** Connects with the key as a header and subscribes; resolves once the subscription is acknowledged. */
export const subscribed = async (
  url: string,
  key: string,
  filters: Record<string, unknown> = {},
  extra: Record<string, unknown> = {}
) => {
  const client = await connectStream(url, { headers: { "x-service-key": key } })
  client.send({ type: "subscribe", filters, ...extra })
  await client.waitFor((m) => m.some((x) => x.type === "subscribed"))
  return client
}
