-- GCRA with one limit: what helpers.lua, gcra.lua and driver.lua decide
-- for one key, written out in few pieces (gcraone.lua has the rest). It is
-- the hot path of the most used algorithm on Redis, and Lua 5.1 builds
-- every function and table anew on each run: this costs the server about
-- a sixth less than the general decide (measured in instructions with
-- callgrind). k is 1.
local function decide(first, k, consume, n, lp)
  local key = KEYS[first + 1]
  local c, t = tonumber(ARGV[lp + 1]), tonumber(ARGV[lp + 2])
  local ct = c * t
  -- The theoretical arrival time, relative to B.
  local tat = NOW
  local v = redis.call("GET", key)
  if v then
    tat = math.max(tat, tatOf(v))
  end
  local ok = n <= c and tat + n * t - NOW <= ct
  if ok and consume then
    tat = tat + n * t
    redis.call("SET", key, stored(tat), "PX", math.max(math.ceil((tat - NOW) / 1e6), 0) + GRACE)
  end
  return answer(ok, n, c, t, ct, tat)
end
