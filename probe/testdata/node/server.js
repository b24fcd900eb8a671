'use strict'

// Real npm rate limiters behind HTTP, for ratelab's probe tests.
//
//   node server.js --port N [--window S]
//
// --port 0 takes any free port; --window is the windows' length in whole
// seconds (10 by default) of every route limited "per window" (20 per
// window), so that a test can probe them in less time.
//
// One process, one port, on 127.0.0.1. Prints exactly one line on stdout,
// `listening http://127.0.0.1:PORT`, once it listens. Exits on SIGTERM or
// SIGINT, and when its stdin (if a pipe or socket) reaches end of file, so a
// test that dies does not leave it running. Every route is keyed by the
// X-User request header, answers 200 "ok\n" when admitted and 429 when
// refused, and ignores the query string. README.md describes each route.

const http = require('node:http')
const fs = require('node:fs')

const { RateLimiterMemory, BurstyRateLimiter } = require('rate-limiter-flexible')
const Fastify = require('fastify')
const fastifyRateLimit = require('@fastify/rate-limit')
const express = require('express')
const { rateLimit } = require('express-rate-limit')
const { TokenBucket, RateLimiter: IntervalRateLimiter } = require('limiter')
const { InMemoryRateLimiter } = require('rolling-rate-limiter')
const { RateLimiter: PacerRateLimiter } = require('@tanstack/pacer')

function parseArgs (argv) {
  const args = { port: 0, window: 10 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--port') args.port = Number(argv[++i])
    else if (a.startsWith('--port=')) args.port = Number(a.slice('--port='.length))
    else if (a === '--window') args.window = Number(argv[++i])
    else if (a.startsWith('--window=')) args.window = Number(a.slice('--window='.length))
    else {
      process.stderr.write(`server.js: unknown argument ${a}\n`)
      process.exit(2)
    }
  }
  if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65535) {
    process.stderr.write('server.js: --port wants an integer 0..65535\n')
    process.exit(2)
  }
  if (!Number.isInteger(args.window) || args.window < 1) {
    process.stderr.write('server.js: --window wants a whole number of seconds, 1 or more\n')
    process.exit(2)
  }
  return args
}

const ARGS = parseArgs(process.argv.slice(2))
// W is the window, in seconds, of every route limited 20 per window.
const W = ARGS.window

// userKey is the limiter key of a request: its X-User header, or, without
// one, its peer address.
function userKey (req) {
  const u = req.headers['x-user']
  return typeof u === 'string' && u !== '' ? u : (req.socket.remoteAddress || 'unknown')
}

function admit (res, headers) {
  res.writeHead(200, { 'Content-Type': 'text/plain', ...headers })
  res.end('ok\n')
}

function refuse (res, headers) {
  res.writeHead(429, { 'Content-Type': 'text/plain', ...headers })
  res.end('Too Many Requests\n')
}

// perKey keeps one instance of a per-key limiter object for each key. The
// stores of rate-limiter-flexible, express-rate-limit, @fastify/rate-limit
// and rolling-rate-limiter are keyed themselves; limiter's and pacer's
// objects limit one stream each, so the routes keep one per X-User.
function perKey (make) {
  const m = new Map()
  return (key) => {
    let v = m.get(key)
    if (v === undefined) {
      v = make()
      m.set(key, v)
    }
    return v
  }
}

// ---------------------------------------------------------------------------
// rate-limiter-flexible: headers as its README ("You may want to set HTTP
// headers for the response") and CONTEXT.md ("HTTP Response Headers
// Pattern") give them, set on every answer, admitted or refused.

function rlfHeaders (points, r) {
  return {
    'Retry-After': r.msBeforeNext / 1000,
    'X-RateLimit-Limit': points,
    'X-RateLimit-Remaining': r.remainingPoints,
    'X-RateLimit-Reset': Math.ceil((Date.now() + r.msBeforeNext) / 1000)
  }
}

function rlfRoute (limiter, points) {
  return (req, res) => {
    limiter.consume(userKey(req)).then(
      (r) => admit(res, rlfHeaders(points, r)),
      (r) => {
        if (r instanceof Error) {
          res.writeHead(500, { 'Content-Type': 'text/plain' })
          res.end(String(r) + '\n')
          return
        }
        refuse(res, rlfHeaders(points, r))
      })
  }
}

const rlfMemory = new RateLimiterMemory({ points: 20, duration: W })
const rlfBursty = new BurstyRateLimiter(
  new RateLimiterMemory({ points: 10, duration: 1 }),
  new RateLimiterMemory({ keyPrefix: 'burst', points: 10, duration: W })
)
const rlfEvenly = new RateLimiterMemory({ points: 20, duration: W, execEvenly: true })

// ---------------------------------------------------------------------------
// limiter: its README's "Reject instead of waiting" HTTP example, per key:
// tryRemoveTokens(1); on refusal 429 with
// Retry-After: max(1, ceil(getWaitTime(1)/1000)), and no other header.

function limiterRoute (get) {
  return (req, res) => {
    const l = get(userKey(req))
    if (!l.tryRemoveTokens(1)) {
      const seconds = Math.max(1, Math.ceil(l.getWaitTime(1) / 1000))
      refuse(res, { 'Retry-After': String(seconds) })
      return
    }
    admit(res, {})
  }
}

// A standalone TokenBucket starts empty (README: "A standalone TokenBucket
// starts empty"); a key's bucket is made full when the key is first seen,
// as limiter's own RateLimiter fills its bucket in its constructor.
const limiterBucket = perKey(() => {
  const b = new TokenBucket({ bucketSize: 20, tokensPerInterval: 10, interval: 'second' })
  b.content = b.bucketSize
  return b
})
const limiterInterval = perKey(() => new IntervalRateLimiter({ tokensPerInterval: 10, interval: 'second' }))

// ---------------------------------------------------------------------------
// rolling-rate-limiter: its README's Express example, in memory: limit(id)
// resolves true when blocked; 429 without headers (it suggests none).

const rolling = new InMemoryRateLimiter({ interval: W * 1000, maxInInterval: 20 })

function rollingRoute (req, res) {
  rolling.limit(userKey(req)).then(
    (blocked) => (blocked ? refuse(res, {}) : admit(res, {})),
    (err) => {
      res.writeHead(500, { 'Content-Type': 'text/plain' })
      res.end(String(err) + '\n')
    })
}

// ---------------------------------------------------------------------------
// @tanstack/pacer: RateLimiter with windowType 'sliding', one per key;
// maybeExecute() returns false when rejected. No headers (it is a function
// rate limiter and documents none).

const pacerSliding = perKey(() => new PacerRateLimiter(() => {}, { limit: 20, window: W * 1000, windowType: 'sliding' }))

function pacerRoute (req, res) {
  if (pacerSliding(userKey(req)).maybeExecute()) admit(res, {})
  else refuse(res, {})
}

const plainRoutes = {
  '/rlf/memory': rlfRoute(rlfMemory, 20),
  '/rlf/bursty': rlfRoute(rlfBursty, rlfBursty.points),
  '/rlf/evenly': rlfRoute(rlfEvenly, 20),
  '/limiter/bucket': limiterRoute(limiterBucket),
  '/limiter/ratelimiter': limiterRoute(limiterInterval),
  '/rolling/log': rollingRoute,
  '/pacer/sliding': pacerRoute
}

// ---------------------------------------------------------------------------
// express + express-rate-limit, default MemoryStore, 20 per 10 s.

const app = express()
app.disable('x-powered-by')
app.disable('etag')
function erlRouter (opts) {
  const r = express.Router()
  r.use(rateLimit({
    windowMs: W * 1000,
    limit: 20,
    keyGenerator: (req) => userKey(req),
    ...opts
  }))
  r.get('/', (req, res) => { res.type('text/plain').send('ok\n') })
  return r
}
// README's usage example: standardHeaders 'draft-8', legacyHeaders false.
app.use('/express/draft8', erlRouter({ standardHeaders: 'draft-8', legacyHeaders: false }))
app.use('/express/draft7', erlRouter({ standardHeaders: 'draft-7', legacyHeaders: false }))
// The option defaults: legacy X-RateLimit-* headers only.
app.use('/express/legacy', erlRouter({}))

// ---------------------------------------------------------------------------
// fastify + @fastify/rate-limit, one registration per encapsulated context.
// fastify owns the node:http server (serverFactory) and passes every
// request outside /fastify/ to the routes above.

function dispatch (fastifyHandler) {
  return (req, res) => {
    const path = req.url.split('?', 1)[0]
    if (path.startsWith('/fastify/')) return fastifyHandler(req, res)
    if (path.startsWith('/express/')) return app(req, res)
    const route = plainRoutes[path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path]
    if (route) return route(req, res)
    res.writeHead(404, { 'Content-Type': 'text/plain' })
    res.end('routes: ' + Object.keys(plainRoutes).concat(
      '/express/draft8', '/express/draft7', '/express/legacy',
      '/fastify/default', '/fastify/continue', '/fastify/draft').join(' ') + '\n')
  }
}

const fastify = Fastify({
  logger: false,
  serverFactory: (handler) => http.createServer(dispatch(handler))
})

function fastifyRoutes (prefix, opts) {
  fastify.register(async (child) => {
    await child.register(fastifyRateLimit, {
      max: 20,
      timeWindow: W * 1000,
      keyGenerator: (req) => userKey(req.raw),
      ...opts
    })
    child.get('/', async (req, reply) => { reply.type('text/plain'); return 'ok\n' })
  }, { prefix })
}
fastifyRoutes('/fastify/default', {})
fastifyRoutes('/fastify/continue', { continueExceeding: true })
fastifyRoutes('/fastify/draft', { enableDraftSpec: true })

// ---------------------------------------------------------------------------

function watchParent () {
  const stop = () => process.exit(0)
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  // Watch stdin only where it can reach end of file because the parent
  // went away: a pipe or a socket. /dev/null (or a terminal) would end at
  // once, or never.
  let st
  try { st = fs.fstatSync(0) } catch { return }
  if (st.isFIFO() || st.isSocket()) {
    process.stdin.on('end', stop)
    process.stdin.on('close', stop)
    process.stdin.on('error', stop)
    process.stdin.resume()
  }
}

async function main () {
  const { port } = ARGS
  watchParent()
  await fastify.listen({ port, host: '127.0.0.1' })
  const addr = fastify.server.address()
  process.stdout.write(`listening http://127.0.0.1:${addr.port}\n`)
}

main().catch((err) => {
  process.stderr.write(`server.js: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
