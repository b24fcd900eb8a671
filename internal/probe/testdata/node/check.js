'use strict'

// Hand check of the routes of server.js (not used by the Go tests):
//
//   node check.js http://127.0.0.1:PORT [route ...] > check.jsonl
//
// For each route, concurrently with the other routes, on keys of its own:
//   burst:  a fresh key sends 25 requests back to back, then, spent, keeps
//           sending 4 a second (one every 250 ms) for 25 s;
//   spread: another fresh key sends 10 requests, one every 500 ms.
// Requests of one key are sequential. Prints one JSON line per answer:
// route, scenario, i, t (ms since the key's first request was sent), rtt
// (ms), status and the rate-limit header fields. `node check.js --table
// check.jsonl` prints the answers as markdown tables.

const fs = require('node:fs')

const ROUTES = [
  '/rlf/memory', '/rlf/bursty', '/rlf/evenly',
  '/fastify/default', '/fastify/continue', '/fastify/draft',
  '/limiter/bucket', '/limiter/ratelimiter', '/rolling/log', '/pacer/sliding',
  '/express/draft8', '/express/draft7', '/express/legacy'
]
const FIELDS = ['retry-after', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset',
  'ratelimit', 'ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function send (base, route, key, n) {
  const res = await fetch(`${base}${route}?ratelab-probe=${n}`, { headers: { 'X-User': key } })
  await res.text()
  const h = {}
  for (const f of FIELDS) {
    const v = res.headers.get(f)
    if (v !== null) h[f] = v
  }
  return { status: res.status, h }
}

async function run (base, route, scenario, key, schedule) {
  const start = Date.now()
  let n = 0
  for (const at of schedule) {
    const wait = start + at - Date.now()
    if (wait > 0) await sleep(wait)
    const sent = Date.now()
    const a = await send(base, route, key, n)
    const epoch = sent / 1000
    process.stdout.write(JSON.stringify({ route, scenario, key, i: n, t: sent - start, rtt: Date.now() - sent, epoch, status: a.status, ...a.h }) + '\n')
    n++
  }
}

async function check (base, routes) {
  const tag = Date.now().toString(36)
  const burst = []
  for (let i = 0; i < 25; i++) burst.push(0)
  for (let i = 1; i <= 100; i++) burst.push(i * 250) // 4 a second for 25 s after the burst
  const spread = []
  for (let i = 0; i < 10; i++) spread.push(i * 500)
  await Promise.all(routes.flatMap((r) => [
    run(base, r, 'burst', `burst-${tag}-${r}`, burst),
    run(base, r, 'spread', `spread-${tag}-${r}`, spread)
  ]))
}

function table (file) {
  const rows = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
  const byRoute = new Map()
  for (const r of rows) {
    const k = r.route + ' ' + r.scenario
    if (!byRoute.has(k)) byRoute.set(k, [])
    byRoute.get(k).push(r)
  }
  for (const [k, rs] of byRoute) {
    const fields = FIELDS.filter((f) => rs.some((r) => r[f] !== undefined))
    console.log(`\n${k}\n`)
    console.log(`| i | t ms | status | ${fields.join(' | ')} |`)
    console.log(`|---|---|---|${fields.map(() => '---').join('|')}|`)
    for (const r of rs) {
      const vals = fields.map((f) => {
        const v = r[f]
        if (v === undefined) return ''
        // Epoch seconds are shown less the send time, to read as "from now".
        if (/^\d{10}$/.test(v)) return `${v} (now+${(Number(v) - r.epoch).toFixed(2)})`
        return v
      })
      console.log(`| ${r.i} | ${r.t} | ${r.status} | ${vals.join(' | ')} |`)
    }
  }
}

const argv = process.argv.slice(2)
if (argv[0] === '--table') {
  table(argv[1])
} else if (argv.length >= 1) {
  check(argv[0].replace(/\/$/, ''), argv.length > 1 ? argv.slice(1) : ROUTES).catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else {
  console.error('usage: node check.js BASE_URL [route ...] | node check.js --table FILE')
  process.exit(2)
}
