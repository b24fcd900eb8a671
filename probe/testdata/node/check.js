'use strict'

// Hand check of the routes of server.js (not used by the Go tests):
//
//   node check.js http://127.0.0.1:PORT [route ...] > check.jsonl
//
// For each route, concurrently with the other routes, on keys of its own:
//   burst:  a fresh key sends 25 requests back to back, then, spent, keeps
//           sending 4 a second (one every 250 ms) for 25 s;
//   spread: another fresh key sends 10 requests, one every 500 ms;
//   parallel: a third fresh key sends 25 requests at once.
// Requests of one key are sequential. Prints one JSON line per answer:
// route, scenario, i, t (ms since the key's first request was sent), rtt
// (ms), status and the rate-limit header fields. `node check.js --table
// check.jsonl` prints the answers as markdown tables (`--short-table`:
// only the rows around each change of status). `node check.js
// --burst-only BASE_URL [route ...]` sends only the burst of 25, one route
// after another.

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
    run(base, r, 'spread', `spread-${tag}-${r}`, spread),
    parallel(base, r, 'parallel', `parallel-${tag}-${r}`, 25)
  ]))
}

// parallel sends n requests at once on a fresh key (not sequential).
async function parallel (base, route, scenario, key, n) {
  const start = Date.now()
  const answers = await Promise.all(Array.from({ length: n }, async (_, i) => {
    const a = await send(base, route, key, i)
    return { i, rtt: Date.now() - start, ...a }
  }))
  for (const a of answers) {
    process.stdout.write(JSON.stringify({ route, scenario, key, i: a.i, t: 0, rtt: a.rtt, epoch: start / 1000, status: a.status, ...a.h }) + '\n')
  }
}

function table (file, short) {
  const rows = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
  const byRoute = new Map()
  for (const r of rows) {
    const k = r.route + ' ' + r.scenario
    if (!byRoute.has(k)) byRoute.set(k, [])
    byRoute.get(k).push(r)
  }
  for (const [k, rs] of byRoute) {
    const fields = FIELDS.filter((f) => rs.some((r) => r[f] !== undefined))
    // short: the first two answers, the two on each side of every change
    // of status, and the last one.
    const keep = new Set([0, 1, rs.length - 1])
    rs.forEach((r, i) => {
      if (i > 0 && r.status !== rs[i - 1].status) [i - 2, i - 1, i, i + 1].forEach((j) => keep.add(j))
    })
    console.log(`\n${k}\n`)
    console.log(`| i | t ms | status |${fields.map((f) => ` ${f} |`).join('')}`)
    console.log(`|---|---|---|${fields.map(() => '---|').join('')}`)
    let elided = false
    rs.forEach((r, i) => {
      if (short && !keep.has(i)) {
        if (!elided) console.log(`| … | | |${fields.map(() => ' |').join('')}`)
        elided = true
        return
      }
      elided = false
      const vals = fields.map((f) => {
        const v = r[f]
        if (v === undefined) return ''
        // Epoch seconds are shown less the send time, to read as "from now".
        if (/^\d{10}$/.test(v)) return `${v} (now+${(Number(v) - r.epoch).toFixed(2)})`
        return v.replace(/\|/g, '\\|')
      })
      console.log(`| ${r.i} | ${r.t} | ${r.status} |${vals.map((v) => ` ${v} |`).join('')}`)
    })
  }
}

// burstOnly sends, route after route, 25 requests back to back on a fresh
// key, after one warm-up request on another key.
async function burstOnly (base, routes) {
  const tag = Date.now().toString(36)
  for (const r of routes) {
    await send(base, r, `warmup-${tag}`, 0)
    await run(base, r, 'burst25', `burst25-${tag}-${r}`, Array(25).fill(0))
  }
}

const argv = process.argv.slice(2)
if (argv[0] === '--table' || argv[0] === '--short-table') {
  table(argv[1], argv[0] === '--short-table')
} else if (argv[0] === '--burst-only') {
  burstOnly(argv[1].replace(/\/$/, ''), argv.length > 2 ? argv.slice(2) : ROUTES).catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else if (argv.length >= 1) {
  check(argv[0].replace(/\/$/, ''), argv.length > 1 ? argv.slice(1) : ROUTES).catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else {
  console.error('usage: node check.js BASE_URL [route ...] | node check.js --table FILE')
  process.exit(2)
}
