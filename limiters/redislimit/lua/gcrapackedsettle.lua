-- A settle of GCRA with one limit, its keys packed (see gcrapacked.lua):
-- what settle.lua and gcra.lua's settle do, on the key's field. KEYS[1]
-- is the hash. ARGV: 1 the units to give back, 2 the units to charge, 3
-- and 4 the time (Unix seconds, nanoseconds), 5 the grace in ms, 6 and 7
-- the time the reservation was decided at, 8 and 9 the limit's C and T
-- (ns), 10 the reservation's reset after (ns), 11 the field.
--
-- The TAT goes down by what of the reservation's last refund units is
-- not yet repaid, never below now, and up by the charge, the debt at
-- most 2^52 ns. It replies as gcrapacked.lua does to a peek of one unit:
-- the debt after, or -debt-1 when one unit would be denied.
at(ARGV[3], ARGV[4], ARGV[5])
local refund, chg = tonumber(ARGV[1]), tonumber(ARGV[2])
local rat = (tonumber(ARGV[6]) - B) * 1e9 + tonumber(ARGV[7])
local c, t, reset = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local key, field = KEYS[1], ARGV[11]
local ct = c * t
local was = NOW
local v = redis.call("HGET", key, field)
if v then
  was = math.max(was, tatOf(v))
end
local tat = was
if refund > 0 then
  tat = math.max(tat - math.min(refund * t, math.max(rat + reset - NOW, 0)), NOW)
end
tat = NOW + math.min(tat - NOW + chg * t, 2 ^ 52)
if tat ~= was then
  redis.call("HSET", key, field, stored(tat))
  local ms = math.max(math.ceil((tat - NOW) / 1e6), 0) + GRACE
  if redis.call("PTTL", key) < ms then
    redis.call("PEXPIRE", key, ms)
  end
end
if tat + t - NOW > ct then
  return NOW - tat - 1
end
return tat - NOW
