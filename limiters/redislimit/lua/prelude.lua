-- ratelab's Redis backend. Every algorithm's script is this prelude, the
-- algorithm, then driver.lua, which decides n for one key against every
-- limit in KEYS, all or nothing.
--
-- Lua numbers are doubles: integers are exact up to 2^53. A Unix time in
-- nanoseconds (about 1.8e18) is not, so a time is handled as nanoseconds
-- relative to B, the whole Unix second of the decision; every period is
-- at most 2^52 ns (52 days), so every time a decision needs fits. Stored
-- times are split into seconds and nanoseconds.
--
-- ARGV: 1 mode ("a" decide and consume, "p" peek), 2 cost n, 3 and 4 the
-- time (Unix seconds, nanoseconds; empty: the server's clock), 5 the grace
-- in milliseconds a key outlives the moment its quota is full again, then
-- two numbers per limit (N and W in ns for a window algorithm; C and T in
-- ns for a bucket algorithm).
local B, NOW
if ARGV[3] == "" then
  local tm = redis.call("TIME")
  B, NOW = tonumber(tm[1]), tonumber(tm[2]) * 1000
else
  B, NOW = tonumber(ARGV[3]), tonumber(ARGV[4])
end
local GRACE = tonumber(ARGV[5])

-- rel is the time s seconds and ns nanoseconds after the Unix epoch,
-- relative to B.
local function rel(s, ns)
  return (s - B) * 1e9 + ns
end

-- divmod returns floor(x / d) and x mod d for integers 0 <= |x| < 2^53 and
-- 0 < d < 2^53, exactly: the quotient of the division in doubles is
-- corrected by its remainder.
local function divmod(x, d)
  local q = math.floor(x / d)
  local r = x - q * d
  if r < 0 then
    q, r = q - 1, r + d
  elseif r >= d then
    q, r = q + 1, r - d
  end
  return q, r
end

-- abs splits a time relative to B into Unix seconds and nanoseconds.
local function abs(r)
  local s, ns = divmod(r, 1e9)
  return B + s, ns
end

-- keep stores v at key until GRACE ms after idle, the time (relative to B)
-- at which the key's quota is full again.
local function keep(key, v, idle)
  local ms = math.ceil((idle - NOW) / 1e6)
  if ms < 0 then
    ms = 0
  end
  redis.call("SET", key, v, "PX", ms + GRACE)
end
