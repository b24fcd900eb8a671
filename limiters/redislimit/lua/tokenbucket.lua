-- Token bucket: the key holds the time of the last refill (Unix seconds
-- and nanoseconds) and the tokens, in nanoseconds of refill (tokens*T).
local function load(key, c, t)
  local s = {lim = c, c = c, t = t, ct = c * t, tokens = c * t, last = NOW}
  local v = redis.call("GET", key)
  if v then
    local sec, ns, tokens = struct.unpack("<IId", v)
    s.last, s.tokens = rel(sec, ns), tokens
    if NOW > s.last then
      s.tokens = math.min(s.ct, s.tokens + (NOW - s.last))
      s.last = NOW
    end
  end
  return s
end

local function admits(s, n)
  return n <= s.c and s.tokens >= n * s.t
end

local function charge(s, key, n)
  s.tokens = s.tokens - n * s.t
  local sec, ns = abs(s.last)
  keep(key, struct.pack("<IId", sec, ns, s.tokens), s.last + s.ct - s.tokens)
end

local function describe(s, n)
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.c then
      retry = s.last + n * s.t - s.tokens - NOW
    end
  end
  return (divmod(math.max(s.tokens, 0), s.t)), retry, s.last + s.ct - s.tokens - NOW -- below 0 in debt
end

-- settle gives back refund units of a reservation decided at rat that
-- was due full again at rat+reset, and charges chg more (see the
-- tokenbucket package's doc): the tokens not yet refilled since, at most
-- a full bucket, and chg tokens below zero if need be.
local function settle(s, key, refund, chg, rat, reset)
  local tokens = s.tokens
  if refund > 0 then
    tokens = math.min(tokens + math.min(refund * s.t, math.max(rat + reset - s.last, 0)), s.ct)
  end
  tokens = s.ct - math.min(s.ct - tokens + chg * s.t, MAXDEBT)
  if tokens ~= s.tokens then
    s.tokens = tokens
    local sec, ns = abs(s.last)
    keep(key, struct.pack("<IId", sec, ns, s.tokens), s.last + s.ct - s.tokens)
  end
end
