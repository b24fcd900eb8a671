-- GCRA with one limit: what helpers.lua, gcra.lua and driver.lua decide
-- for one key, written out in one piece. It is the hot path of the most
-- used algorithm on Redis, and Lua 5.1 builds every function and table
-- anew on each run: this costs the server about a sixth less than the
-- general decide (measured in instructions with callgrind). k is 1.
-- gcrapacked.lua shares parts of it through gcratat.lua; here they stay
-- written out, since calling them as functions cost 4.2k instructions a
-- run (80k a decision against 84k, callgrind, redis-server 7.0).
--
-- It replies with one number, the debt: how far the theoretical arrival
-- time (TAT) is ahead of now, in ns, after the decision; -debt-1 when it
-- denies. The client works out the rest (remaining, retry after) from
-- the debt and the limit, as the in-memory GCRA does from its TAT. With
-- the limit read once a run, this saved the server 2k instructions of 75k
-- a decision alone, and 7k of 46k a decision in a batch (callgrind,
-- redis-server 7.0), against six integers written with string.format.
local C, T, CT -- the limit's capacity and emission interval, read once a run
local function decide(first, k, consume, n, lp)
  if not C then
    C, T = tonumber(ARGV[lp + 1]), tonumber(ARGV[lp + 2])
    CT = C * T
  end
  local key = KEYS[first + 1]
  -- The TAT, relative to B, stored as Unix nanoseconds.
  local tat = NOW
  local v = redis.call("GET", key)
  if v then
    local len, stored = #v, nil
    if len <= 9 then
      stored = tonumber(v) - B * 1e9
    else
      stored = (tonumber(string.sub(v, 1, len - 9)) - B) * 1e9 + tonumber(string.sub(v, len - 8))
    end
    if stored > NOW then
      tat = stored
    end
  end
  if n > C or tat + n * T - NOW > CT then
    return NOW - tat - 1
  end
  if consume then
    tat = tat + n * T
    -- tat as Unix seconds and nanoseconds: divmod(tat, 1e9), exactly.
    local s = math.floor(tat / 1e9)
    local ns = tat - s * 1e9
    if ns < 0 then
      s, ns = s - 1, ns + 1e9
    elseif ns >= 1e9 then
      s, ns = s + 1, ns - 1e9
    end
    redis.call("SET", key, string.format("%d%09d", B + s, ns), "PX", math.max(math.ceil((tat - NOW) / 1e6), 0) + GRACE)
  end
  return tat - NOW
end
