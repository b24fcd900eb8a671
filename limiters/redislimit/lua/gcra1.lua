-- GCRA with one limit: what helpers.lua, gcra.lua and driver.lua decide
-- for one key, written out in one piece. It is the hot path of the most
-- used algorithm on Redis, and Lua 5.1 builds every function and table
-- anew on each run: this costs the server about a sixth less than the
-- general decide (measured in instructions with callgrind). k is 1.
-- gcrapacked.lua shares parts of it through gcraone.lua; here they stay
-- written out, since the three functions cost 4.2k instructions a run
-- (80k a decision against 84k, callgrind, redis-server 7.0).
local function decide(first, k, consume, n, lp)
  local key = KEYS[first + 1]
  local c, t = tonumber(ARGV[lp + 1]), tonumber(ARGV[lp + 2])
  local ct = c * t
  -- The theoretical arrival time, relative to B, stored as Unix nanoseconds.
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
  local ok = n <= c and tat + n * t - NOW <= ct
  if ok and consume then
    tat = tat + n * t
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
  local debt = tat - NOW
  local remaining = 0
  if debt < ct then
    -- floor((ct - debt) / t), exactly.
    local x = ct - debt
    remaining = math.floor(x / t)
    local r = x - remaining * t
    if r < 0 then
      remaining = remaining - 1
    elseif r >= t then
      remaining = remaining + 1
    end
  end
  if ok then
    return string.format("1 0 %d %d 0 %d", c, remaining, debt)
  end
  local retry = -1
  if n <= c then
    retry = debt + n * t - ct
  end
  return string.format("0 1 %d %d %d %d", c, remaining, retry, debt)
end
