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
