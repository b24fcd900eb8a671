-- Sliding window log: the key holds the log of admitted requests, oldest
-- first: 8 bytes, the count admitted before the first entry, then 16
-- bytes an entry: its time (Unix seconds and nanoseconds) and the count
-- admitted up to and including it. Requests admitted at the same instant
-- share an entry. An entry leaves the log when a request is admitted more
-- than W after it.
local HEAD, ENTRY = 8, 16

-- entry returns the time (relative to B) and the running count of the
-- log's i-th entry (1-based).
local function entry(v, i)
  local sec, ns, cum = struct.unpack("<IId", v, HEAD + 1 + (i - 1) * ENTRY)
  return rel(sec, ns), cum
end

-- after returns the first of the entries lo..m whose time (if time is
-- true) or running count (else) is above x; m+1 if none is.
local function after(v, lo, m, x, time)
  local hi = m + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local at, cum = entry(v, mid)
    local y = cum
    if time then
      y = at
    end
    if y > x then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

local function load(key, n, w)
  local s = {lim = n, n = n, w = w, at = NOW, m = 0, first = 1, live = 0, base = 0}
  local v = redis.call("GET", key)
  if v then
    s.v = v
    s.m = (#v - HEAD) / ENTRY
    s.base = struct.unpack("<d", v)
    if s.m > 0 then
      local newest, total = entry(v, s.m)
      s.newest, s.total = newest, total
      s.at = math.max(NOW, newest)
      s.first = after(v, 1, s.m, s.at - w, true)
      local before = s.base
      if s.first > 1 then
        local _, cum = entry(v, s.first - 1)
        before = cum
      end
      s.before, s.live = before, total - before
    end
  end
  return s
end

local function admits(s, n)
  return n <= s.n - s.live
end

local function charge(s, key, n)
  local sec, ns = abs(s.at)
  local head, kept = s.base, ""
  if s.m > 0 then
    head = s.before
    local stop = #s.v
    if s.newest == s.at then -- one more request at the same instant: the entry grows
      stop = stop - ENTRY
    end
    kept = string.sub(s.v, HEAD + 1 + (s.first - 1) * ENTRY, stop)
  end
  s.total = (s.total or s.base) + n
  s.live, s.newest = s.live + n, s.at
  keep(key, struct.pack("<d", head) .. kept .. struct.pack("<IId", sec, ns, s.total), s.at + s.w)
end

local function describe(s, n)
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.n then
      -- The request fits once the (live+n-N)-th live unit has left.
      local j = after(s.v, s.first, s.m, s.before + s.live + n - s.n - 1, false)
      local at = entry(s.v, j)
      retry = at + s.w - NOW
    end
  end
  local reset = 0
  if s.live > 0 then
    reset = s.newest + s.w - NOW
  end
  return math.max(s.n - s.live, 0), retry, reset
end

-- settle gives back refund units of a reservation whose entry is at
-- rat+reset-W (the time it was logged at), if that entry is still in the
-- window, and charges chg more at the decision's time, past N if need be:
-- the log then keeps its newest N units, the oldest dropped, which decides
-- as keeping them all (see the slidinglog package's doc). It writes the
-- live entries again, counting from zero.
local function settle(s, key, refund, chg, rat, reset)
  if s.m == 0 and chg == 0 then
    return
  end
  local times, units = {}, {}
  local prev = s.before or s.base
  for i = s.first, s.m do
    local at, cum = entry(s.v, i)
    times[#times + 1], units[#units + 1] = at, cum - prev
    prev = cum
  end
  local stamp = rat + reset - s.w
  if refund > 0 and stamp > s.at - s.w then
    for i = 1, #times do
      if times[i] == stamp then
        units[i] = units[i] - math.min(refund, units[i])
        break
      end
    end
  end
  if chg > 0 then
    local add = math.min(chg, s.n)
    if #times > 0 and times[#times] == s.at then
      units[#units] = units[#units] + add
    else
      times[#times + 1], units[#units + 1] = s.at, add
    end
  end
  local live = 0
  for i = 1, #units do
    live = live + units[i]
  end
  local drop = math.max(live - s.n, 0) -- the oldest, past N
  local parts, cum, newest = {struct.pack("<d", 0)}, 0, nil
  for i = 1, #times do
    local u = units[i]
    if drop > 0 then
      local d = math.min(drop, u)
      u, drop = u - d, drop - d
    end
    if u > 0 then
      cum = cum + u
      local sec, ns = abs(times[i])
      parts[#parts + 1] = struct.pack("<IId", sec, ns, cum)
      newest = times[i]
    end
  end
  if newest == nil then
    redis.call("DEL", key)
    return
  end
  keep(key, table.concat(parts), newest + s.w)
end
