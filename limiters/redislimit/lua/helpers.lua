-- Times relative to B, exact division, and keys that expire when idle.

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

-- MAXDEBT is the most time a key's debt may reach, in ns (2^52, 52 days):
-- charges past it are cut to it, so that every time stays exact.
local MAXDEBT = 2 ^ 52

-- keep stores v at key until GRACE ms after idle, the time (relative to B)
-- at which the key's quota is full again.
local function keep(key, v, idle)
  local ms = math.ceil((idle - NOW) / 1e6)
  if ms < 0 then
    ms = 0
  end
  redis.call("SET", key, v, "PX", ms + GRACE)
end
