-- Leaky bucket (a meter): the key holds the time of the last leak (Unix
-- seconds and nanoseconds) and the level, in nanoseconds of leaking
-- (level*T).
local function load(key, c, t)
  local s = {lim = c, c = c, t = t, ct = c * t, level = 0, last = NOW}
  local v = redis.call("GET", key)
  if v then
    local sec, ns, level = struct.unpack("<IId", v)
    s.last, s.level = rel(sec, ns), level
    if NOW > s.last then
      s.level = math.max(0, s.level - (NOW - s.last))
      s.last = NOW
    end
  end
  return s
end

local function admits(s, n)
  return n <= s.c and s.level + n * s.t <= s.ct
end

local function charge(s, key, n)
  s.level = s.level + n * s.t
  local sec, ns = abs(s.last)
  keep(key, struct.pack("<IId", sec, ns, s.level), s.last + s.level)
end

local function describe(s, n)
  local remaining = 0
  if s.level < s.ct then
    remaining = divmod(s.ct - s.level, s.t)
  end
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.c then
      retry = math.max(s.last + s.level + n * s.t - s.ct - NOW, 0)
    end
  end
  return remaining, retry, s.last + s.level - NOW
end

-- settle gives back refund units of a reservation decided at rat that
-- was due empty again at rat+reset, and charges chg more (see the
-- leakybucket package's doc): the water not yet drained since, never
-- below empty, and chg units past full if need be.
local function settle(s, key, refund, chg, rat, reset)
  local level = s.level
  if refund > 0 then
    level = math.max(level - math.min(refund * s.t, math.max(rat + reset - s.last, 0)), 0)
  end
  level = math.min(level + chg * s.t, MAXDEBT)
  if level ~= s.level then
    s.level = level
    local sec, ns = abs(s.last)
    keep(key, struct.pack("<IId", sec, ns, s.level), s.last + s.level)
  end
end
