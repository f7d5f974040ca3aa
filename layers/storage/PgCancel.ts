import { Fiber, Option } from "effect"
import pg from "pg"

/**
 * How @effect/sql-pg cancels an interrupted statement: this text through `pool.query`, naming the backend's process
 * id. A cancel names a backend process, not a statement: whatever that backend runs when the signal lands is
 * cancelled, which is why CancelSafePool decides here whether (and how) it is sent.
 */
const CANCEL = /^SELECT pg_cancel_backend\((\d+)\)$/

/** How long a cancel may go unacknowledged before its connection is given up on (closed, never reused). */
const CANCEL_ACK_MS = 3000

/**
 * A checked-out client's connection can die after everyone stopped listening to it: @effect/sql-pg stops at the
 * first error, and a release held until a cancel settles (below) leaves the client out of the pool's hands meanwhile.
 * pg emits the connection's end as a second "error" then, and an event emitter's error with no listener ends the
 * process. Its queries have failed already and the pool drops it on release: the late error is of no further use.
 */
const ignoreLateError = () => {}
const guardedClients = new WeakSet<pg.PoolClient>()

/** The error a connection is released with to make the pool close it instead of keeping it. */
const retired = () => new Error("retired: a cancel sent to its backend may still land")

/**
 * node-postgres's client, counting its statements in flight (those given a callback: every statement
 * @effect/sql-pg can cancel), so that a cancel is sent only while a statement is running.
 */
export class TrackingClient extends pg.Client {
  inFlight = 0
  /** Called each time the last statement in flight has finished. */
  onIdle: (() => void) | undefined = undefined
  override query(...args: Array<unknown>): any {
    const last = args.length - 1
    const callback = args[last]
    if (typeof callback === "function") {
      this.inFlight++
      let settled = false
      args[last] = (...results: Array<unknown>) => {
        if (!settled) {
          settled = true
          this.inFlight--
          if (this.inFlight === 0) this.onIdle?.()
        }
        return callback(...results)
      }
    }
    return (super.query as (...a: Array<unknown>) => unknown)(...args)
  }
}

/** One hand-out of a client by the pool: who asked for it, and the state of a cancel sent to its backend. */
interface Checkout {
  readonly client: pg.PoolClient & Partial<Pick<TrackingClient, "inFlight" | "onIdle">>
  readonly owner: unknown
  /** A cancel is on its way and not yet acknowledged: the client is not given back to the pool meanwhile. */
  cancelling: boolean
  /** A cancel was sent: the client goes back to the pool once its statement has finished too. */
  cancelled: boolean
  /** A cancel's fate is unknown (it failed or went unacknowledged): the client is closed on release, never reused. */
  retire: boolean
  /** The release asked for while a cancel was on its way or its statement still running, run when both are over. */
  heldRelease: (() => void) | undefined
}

/**
 * Who runs a statement: the context of the fiber executing it. @effect/sql opens a scope for every statement it runs
 * (a context of its own), asks the pool for a connection inside it, and cancels inside it after an interruption (from a
 * fiber forked there, which inherits that context). Another statement, on any fiber, has another context.
 */
const currentStatement = (): unknown => Option.getOrUndefined(Fiber.getCurrentFiber())?.currentContext

/**
 * Gives a released client back once no cancel is on its way to its backend and (a cancel having been sent) its
 * statement has finished; at once when the client is retired (closed: its statement ends with it).
 */
const releaseWhenSettled = (checkout: Checkout) => {
  const held = checkout.heldRelease
  if (held === undefined) return
  const waiting =
    !checkout.retire && (checkout.cancelling || (checkout.cancelled && (checkout.client.inFlight ?? 0) > 0))
  if (waiting) return
  checkout.heldRelease = undefined
  checkout.client.onIdle = undefined
  held()
}

/**
 * The pool @effect/sql-pg runs over (PostgreSQL only), sending an interrupted statement's cancel so that it can never
 * reach another statement. @effect/sql-pg cancels by running `SELECT pg_cancel_backend(pid)` through this pool after
 * the interruption; left as is, (a) every cancel waits for a connection of the same pool (a burst of interruptions
 * holds the pool and queues behind itself), and (b) the interrupted statement may finish first, its connection go back
 * to the pool and start another request's statement, which the late cancel then kills (57014, a 503 on a healthy
 * request). Here instead:
 * - the cancel is sent only while the interrupted statement still holds that connection, running;
 *   otherwise the statement has finished and there is nothing to cancel (the cancel is dropped, not sent);
 * - it goes over a connection of its own, outside the pool (opened on demand, closed when idle);
 * - until it is acknowledged (the signal is then on the backend, which discards it if idle), the connection is not
 *   given back to the pool even if the statement finishes meanwhile; a cancel that fails or goes unacknowledged
 *   retires the connection (closed, not reused).
 */
export class CancelSafePool extends pg.Pool {
  private readonly checkouts = new Map<number, Checkout>()
  private cancelPool: pg.Pool | undefined

  override connect(...args: Array<unknown>): any {
    const callback = args[0]
    if (typeof callback !== "function") {
      return new Promise((resolve, reject) =>
        this.connect((err: Error | undefined, client: pg.PoolClient) => (err ? reject(err) : resolve(client)))
      )
    }
    const owner = currentStatement()
    return super.connect((err, client, release) => {
      if (err || client === undefined) return callback(err, client, release)
      if (!guardedClients.has(client)) {
        guardedClients.add(client)
        client.on("error", ignoreLateError)
      }
      const pid = (client as { processID?: number }).processID
      const checkout: Checkout = {
        client,
        owner,
        cancelling: false,
        cancelled: false,
        retire: false,
        heldRelease: undefined
      }
      if (pid !== undefined) this.checkouts.set(pid, checkout)
      const poolRelease = client.release
      const guarded = (cause?: Error | boolean) => {
        if (pid !== undefined && this.checkouts.get(pid) === checkout) this.checkouts.delete(pid)
        const giveBack = () => poolRelease(checkout.retire ? (cause ?? retired()) : cause)
        checkout.heldRelease = giveBack
        releaseWhenSettled(checkout)
      }
      client.release = guarded
      callback(undefined, client, guarded)
    })
  }

  override query(...args: Array<unknown>): any {
    const [text] = args
    const callback = args[args.length - 1]
    const match = typeof text === "string" ? CANCEL.exec(text) : null
    if (match === null || typeof callback !== "function") {
      return (super.query as (...a: Array<unknown>) => unknown)(...args)
    }
    this.cancelBackend(Number(match[1]), () => callback())
    return undefined
  }

  override end(...args: Array<unknown>): any {
    const cancelPool = this.cancelPool
    this.cancelPool = undefined
    cancelPool?.end().catch(() => {})
    return (super.end as (...a: Array<unknown>) => unknown)(...args)
  }

  private cancelBackend(pid: number, done: () => void) {
    const checkout = this.checkouts.get(pid)
    // Sent only while the interrupted statement itself still holds the connection with a statement in flight. Anything
    // else means it is over: the connection is back in the pool or another statement's, which must not be cancelled.
    if (
      checkout === undefined ||
      checkout.cancelling ||
      checkout.owner === undefined ||
      checkout.owner !== currentStatement() ||
      (checkout.client.inFlight ?? 1) === 0
    ) {
      done()
      return
    }
    checkout.cancelling = true
    checkout.cancelled = true
    checkout.client.onIdle = () => releaseWhenSettled(checkout)
    let settled = false
    const settle = (failed: boolean) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      checkout.cancelling = false
      if (failed) checkout.retire = true
      releaseWhenSettled(checkout)
      done()
    }
    const timer = setTimeout(() => settle(true), CANCEL_ACK_MS)
    this.cancelConnection().query("SELECT pg_cancel_backend($1)", [pid], (err) =>
      settle(err !== undefined && err !== null)
    )
  }

  /** The connection cancels go over: outside the pool, one at most, opened on demand and closed when idle. */
  private cancelConnection() {
    if (this.cancelPool === undefined) {
      const { Client: _client, max: _max, min: _min, idleTimeoutMillis: _idle, ...options } = this.options
      this.cancelPool = new pg.Pool({ ...options, max: 1, idleTimeoutMillis: 10_000, allowExitOnIdle: true })
      this.cancelPool.on("error", () => {})
    }
    return this.cancelPool
  }
}
