import { readFileSync } from "node:fs"
import { freshDatabase, startServer, connect, runBench, filler } from "./Harness.ts"
import { splitPayload } from "#layers/traces/PayloadSplit"
runBench(async () => {
  const { databaseUrl } = await freshDatabase("tapedeck_prof_")
  const server = await startServer(databaseUrl)
  await server.stop()
  const db = await connect(databaseUrl)
  const acc = (await db.query("INSERT INTO accounts (id, name) VALUES (gen_random_uuid(), 'p') RETURNING id")).rows[0].id
  const sys = { role: "system", content: filler(2000) }
  const tools = Array.from({ length: 8 }, (_, i) => ({ name: `t${i}`, d: filler(300) }))
  const history: any[] = [sys]
  for (let i = 0; i < 30; i++) history.push({ role: "assistant", content: filler(200) + i }, { role: "tool", content: filler(1500) + i })
  const value = { model: "gpt-4o", messages: history, tools }
  const input = JSON.stringify(value)
  const split = splitPayload(value)!
  const pid = (await db.query("SELECT pg_backend_pid() AS p")).rows[0].p
  const cpu = () => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" "); return (Number(f[11]) + Number(f[12])) * 10 }
  const N = 200
  const time = async (label: string, q: () => Promise<unknown>) => {
    const c0 = cpu(); const t0 = performance.now()
    for (let k = 0; k < N; k++) await q()
    console.log(label.padEnd(20), "wall", ((performance.now() - t0) / N).toFixed(2), "cpu", ((cpu() - c0) / N).toFixed(3), "ms")
  }
  const whole = () => db.query(`INSERT INTO spans (trace_id, account_id, id, span_type, name, input, started_at) VALUES (gen_random_uuid(), $1, gen_random_uuid(), 'llm_call', 'x', $2::json, now())`, [acc, input])
  const parts = () => db.query(`INSERT INTO spans (trace_id, account_id, id, span_type, name, input_skel, input_parts, input_hashes, started_at) SELECT gen_random_uuid(), $1, gen_random_uuid(), 'llm_call', 'x', x.s, x.p, x.h, now() FROM json_to_record($2::json) AS x(s text, p text[], h text[])`, [acc, JSON.stringify({ s: split.skel, p: split.parts, h: split.hashes })])
  await time("parts warm", parts)
  for (let r = 0; r < 2; r++) {
    await time("parts", parts)
    await time("whole(trigger cut)", whole)
    await db.query("ALTER TABLE spans DISABLE TRIGGER spans_share")
    await time("whole inline", whole)
    await db.query("ALTER TABLE spans ENABLE TRIGGER spans_share")
    await time("share_parts only", () => db.query(`SELECT tapedeck_share_parts($1, $2::text[])`, [acc, split.parts]))
    await time("sha only", () => db.query(`SELECT ARRAY(SELECT sha256(convert_to(t, 'UTF8')) FROM unnest($1::text[]) AS t)`, [split.parts]))
    await time("select 1", () => db.query(`SELECT 1`))
  }
  await db.query("DROP INDEX spans_content_refs")
  await time("parts no gin", parts)
})
