/** A loopback TCP proxy to a real server that a test can cut (refusing and dropping connections) and restore. */
export interface TcpProxy {
  readonly port: number
  readonly cut: () => void
  readonly restore: () => void
  readonly stop: () => void
}

export const startTcpProxy = (target: { readonly hostname: string; readonly port: number }): TcpProxy => {
  let open = true
  const pairs = new Set<{ client: any; upstream: any }>()
  const server = Bun.listen<{ pair?: { client: any; upstream: any }; pending: Array<Uint8Array> }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        client.data = { pending: [] }
        if (!open) return void client.end()
        Bun.connect({
          hostname: target.hostname,
          port: target.port,
          socket: {
            open(upstream) {
              const pair = { client, upstream }
              pairs.add(pair)
              client.data.pair = pair
              for (const chunk of client.data.pending) upstream.write(chunk)
              client.data.pending = []
            },
            data(_upstream, chunk) {
              client.write(chunk)
            },
            close() {
              client.end()
            },
            error() {
              client.end()
            }
          }
        }).catch(() => client.end())
      },
      data(client, chunk) {
        if (client.data.pair) client.data.pair.upstream.write(chunk)
        else client.data.pending.push(new Uint8Array(chunk))
      },
      close(client) {
        const pair = client.data?.pair
        if (pair) {
          pairs.delete(pair)
          pair.upstream.end()
        }
      }
    }
  })
  const cutAll = () => {
    for (const pair of pairs) {
      pair.client.end()
      pair.upstream.end()
    }
    pairs.clear()
  }
  return {
    port: server.port,
    cut: () => {
      open = false
      cutAll()
    },
    restore: () => {
      open = true
    },
    stop: () => {
      cutAll()
      server.stop(true)
    }
  }
}
