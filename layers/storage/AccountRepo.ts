import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { AccountId } from "#src/domain/Ids"

const AccountRow = Schema.Struct({ id: AccountId, name: Schema.String })

/** Accounts own every record. Names are unique and stable; ids are what rows reference. */
export class AccountRepo extends Effect.Service<AccountRepo>()("tapedeck/AccountRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const findByNameOption = SqlSchema.findOne({
      Request: Schema.String,
      Result: AccountRow,
      execute: (name) => sql`SELECT id, name FROM accounts WHERE name = ${name}`
    })

    /** The account's id, creating the account when it does not exist yet (safe under concurrency). */
    const ensure = Effect.fn("AccountRepo.ensure")(
      function* (name: string) {
        const id = crypto.randomUUID()
        yield* sql`INSERT INTO accounts (id, name) VALUES (${id}, ${name}) ON CONFLICT (name) DO NOTHING`
        const row = yield* findByNameOption(name)
        return Option.getOrThrow(row).id
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    const findByName = Effect.fn("AccountRepo.findByName")(
      function* (name: string) {
        return Option.map(yield* findByNameOption(name), (row) => row.id)
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    const findByIdOption = SqlSchema.findOne({
      Request: AccountId,
      Result: AccountRow,
      execute: (id) => sql`SELECT id, name FROM accounts WHERE id = ${id}`
    })

    /** The account with this id; a missing one is a defect (ids come from credentials, and accounts are never deleted). */
    const findById = Effect.fn("AccountRepo.findById")(
      function* (id: AccountId) {
        return Option.getOrThrowWith(yield* findByIdOption(id), () => new Error(`account ${id} does not exist`))
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    const count = Effect.fn("AccountRepo.count")(
      function* () {
        const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM accounts`
        return rows[0]?.n ?? 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const listRows = SqlSchema.findAll({
      Request: Schema.Number,
      Result: AccountRow,
      execute: (limit) => sql`SELECT id, name FROM accounts ORDER BY name LIMIT ${limit}`
    })

    /** Up to `limit` accounts, by name. */
    const list = Effect.fn("AccountRepo.list")(
      function* (limit: number) {
        return yield* listRows(limit)
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    return { ensure, findByName, findById, count, list } as const
  })
}) {}
