import { freshDatabase, startServer, connect, runBench, filler } from "./Harness.ts"
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
  const input = JSON.stringify({ model: "gpt-4o", messages: history, tools })
  console.log("input bytes", input.length)
  const pid = (await db.query("SELECT pg_backend_pid() AS p")).rows[0].p
  const { readFileSync } = await import("node:fs")
  const cpu = () => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" "); return (Number(f[11]) + Number(f[12])) * 10 }
  const run = async (label: string) => {
    const c0 = cpu()
    const t0 = performance.now()
    for (let k = 0; k < 100; k++) {
      await db.query(`INSERT INTO spans (trace_id, account_id, id, span_type, name, input, started_at) VALUES (gen_random_uuid(), $1, gen_random_uuid(), 'llm_call', 'x', $2::json, now())`, [acc, input])
    }
    console.log(label, ((performance.now() - t0) / 100).toFixed(2), "ms/span", "cpu", ((cpu() - c0) / 100).toFixed(2))
  }
  await run("shared warm")
  await run("shared")
  await db.query("ALTER TABLE spans DISABLE TRIGGER spans_share")
  await run("inline")
  await db.query("ALTER TABLE spans ENABLE TRIGGER spans_share")
  await run("shared")
  // parts only
  const r = await db.query(`SELECT count(*) FROM (SELECT tapedeck_cut($1::json, 0, '', '{}')) x`, [input])
  let c0 = cpu()
  let t0 = performance.now()
  for (let k = 0; k < 100; k++) await db.query(`SELECT tapedeck_cut($1::json, 0, '', '{}')`, [input])
  console.log("cut only", ((performance.now() - t0) / 100).toFixed(2), "cpu", ((cpu() - c0) / 100).toFixed(2)); c0 = cpu()
  const parts = (await db.query(`SELECT (tapedeck_cut($1::json, 0, '', '{}')).parts`, [input])).rows[0].parts
  t0 = performance.now()
  for (let k = 0; k < 100; k++) await db.query(`SELECT tapedeck_share_parts($1, $2::text[])`, [acc, parts])
  console.log("share only", ((performance.now() - t0) / 100).toFixed(2), "cpu", ((cpu() - c0) / 100).toFixed(2)); c0 = cpu()
  t0 = performance.now()
  for (let k = 0; k < 100; k++) await db.query(`SELECT 1`)
  console.log("roundtrip", ((performance.now() - t0) / 100).toFixed(2))
  const tid = (await db.query(`SELECT trace_id FROM spans WHERE input_skel IS NOT NULL LIMIT 1`)).rows[0].trace_id
  t0 = performance.now()
  for (let k = 0; k < 100; k++) await db.query(`SELECT tapedeck_payload_text(input, input_skel, input_refs) FROM spans WHERE trace_id = $1`, [tid])
  console.log("assemble", ((performance.now() - t0) / 100).toFixed(2), "cpu", ((cpu() - c0) / 100).toFixed(2)); c0 = cpu()
  t0 = performance.now()
  for (let k = 0; k < 100; k++) await db.query(`SELECT input::text FROM spans WHERE input IS NOT NULL LIMIT 1`)
  console.log("inline read", ((performance.now() - t0) / 100).toFixed(2), "cpu", ((cpu() - c0) / 100).toFixed(2)); c0 = cpu()
})
