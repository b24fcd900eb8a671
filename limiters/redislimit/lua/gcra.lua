-- GCRA: the key holds the theoretical arrival time (TAT) in Unix
-- nanoseconds, as a decimal integer (which Redis keeps as a 64-bit
-- integer: no string is allocated for it).
local function load(key, c, t)
  local s = {lim = c, c = c, t = t, ct = c * t, tat = NOW}
  local v = redis.call("GET", key)
  if v then
    local len = #v
    local tat
    if len <= 9 then
      tat = rel(0, tonumber(v))
    else
      tat = rel(tonumber(string.sub(v, 1, len - 9)), tonumber(string.sub(v, len - 8)))
    end
    if tat > NOW then
      s.tat = tat
    end
  end
  return s
end

local function admits(s, n)
  return n <= s.c and s.tat + n * s.t - NOW <= s.ct
end

local function charge(s, key, n)
  s.tat = s.tat + n * s.t
  local sec, ns = abs(s.tat)
  keep(key, string.format("%d%09d", sec, ns), s.tat)
end

local function describe(s, n)
  local debt = s.tat - NOW
  local remaining = 0
  if debt < s.ct then
    remaining = divmod(s.ct - debt, s.t)
  end
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.c then
      retry = debt + n * s.t - s.ct
    end
  end
  return remaining, retry, debt
end

-- settle gives back refund units of a reservation decided at rat that
-- was due full again at rat+reset, and charges chg more (see the gcra
-- package's doc): the TAT goes down by what of the reservation's last
-- refund units is not yet repaid, never below now, and up by chg units.
local function settle(s, key, refund, chg, rat, reset)
  local tat = s.tat
  if refund > 0 then
    tat = math.max(tat - math.min(refund * s.t, math.max(rat + reset - NOW, 0)), NOW)
  end
  tat = NOW + math.min(tat - NOW + chg * s.t, MAXDEBT)
  if tat ~= s.tat then
    s.tat = tat
    local sec, ns = abs(tat)
    keep(key, string.format("%d%09d", sec, ns), tat)
  end
end
