import net from "node:net"

/** A loopback TCP proxy to a real server that a test can cut (refusing and dropping connections) and restore. */
export interface TcpProxy {
  readonly port: number
  readonly cut: () => void
  readonly restore: () => void
  readonly stop: () => void
}

/**
 * Streams are piped (node:net), so a busy connection is buffered with backpressure rather than losing bytes.
 * Resolves once listening.
 */
export const startTcpProxy = async (target: {
  readonly hostname: string
  readonly port: number
}): Promise<TcpProxy> => {
  let open = true
  const sockets = new Set<net.Socket>()
  const track = (socket: net.Socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => socket.destroy())
  }
  const server = net.createServer((client) => {
    track(client)
    if (!open) return void client.destroy()
    const upstream = net.connect(target.port, target.hostname)
    track(upstream)
    client.pipe(upstream)
    upstream.pipe(client)
    client.on("close", () => upstream.destroy())
    upstream.on("close", () => client.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const cutAll = () => {
    for (const socket of sockets) socket.destroy()
    sockets.clear()
  }
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => {
      open = false
      cutAll()
    },
    restore: () => {
      open = true
    },
    stop: () => {
      cutAll()
      server.close()
    }
  }
}
