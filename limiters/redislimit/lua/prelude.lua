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

-- twoprod returns p and e with p + e == a * b exactly (Dekker's product,
-- for doubles without a fused multiply-add).
local function twoprod(a, b)
  local p = a * b
  local c = 134217729 * a
  local ah = c - (c - a)
  local al = a - ah
  c = 134217729 * b
  local bh = c - (c - b)
  local bl = b - bh
  return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
end

-- muldiv returns floor(a * b / c) and the remainder, exactly, for integers
-- 0 <= a, b < 2^53 and 0 < c < 2^53 whose quotient is below 2^53: a * b
-- may be far above 2^53.
local function muldiv(a, b, c)
  local q = math.floor(a * b / c)
  local p1, e1 = twoprod(a, b)
  for _ = 1, 8 do
    local p2, e2 = twoprod(q, c)
    local r = (p1 - p2) + (e1 - e2)
    if r >= 0 and r < c then
      return q, r
    end
    q = q + math.floor(r / c)
  end
  return redis.error_reply("ratelab: muldiv(" .. a .. ", " .. b .. ", " .. c .. ") did not converge")
end

-- window returns, for windows of w ns aligned to the Unix epoch, the index
-- of the window holding NOW and the time it starts, relative to B.
local function window(w)
  local q0, r0 = muldiv(B, 1e9, w) -- B*1e9 = q0*w + r0
  local j, e = divmod(r0 + NOW, w)
  return q0 + j, NOW - e
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
