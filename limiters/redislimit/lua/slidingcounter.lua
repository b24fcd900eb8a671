-- Sliding window counter: the key holds the current window's index k and
-- the counts spent in windows k-1 and k. The previous window's count is
-- weighted by how much of it still overlaps (t-W, t], rounded up.
local function load(key, n, w)
  local k, start = window(w)
  local s = {lim = n, n = n, w = w, k = k, start = start, prev = 0, curr = 0, e = NOW - start}
  local v = redis.call("GET", key)
  if v then
    local sk, prev, curr = struct.unpack("<ddd", v)
    if k == sk + 1 then
      s.prev = curr
    elseif k == sk then
      s.prev, s.curr = prev, curr
    elseif k < sk then -- the clock stepped back: decide at the start of the later window
      s.k, s.start, s.prev, s.curr, s.e = sk, start + (sk - k) * w, prev, curr, 0
    end
  end
  s.weighted = 0
  if s.prev > 0 then
    local q, r = muldiv(s.prev, w - s.e, w)
    if r > 0 then
      q = q + 1
    end
    s.weighted = q
  end
  return s
end

local function admits(s, n)
  return n <= s.n - s.curr - s.weighted
end

local function charge(s, key, n)
  s.curr = s.curr + n
  keep(key, struct.pack("<ddd", s.k, s.prev, s.curr), s.start + 2 * s.w)
end

-- fit is how far into a window a count of prev in the window before must
-- be for room more to fit: the least e with ceil(prev*(W-e)/W) <= room.
local function fit(s, prev, room)
  if room >= prev then
    return 0
  end
  return s.w - (muldiv(room, s.w, prev))
end

local function describe(s, n)
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.n then
      local at
      local room = s.n - s.curr - n
      if room >= 0 then
        local e2 = fit(s, s.prev, room)
        if e2 < s.w then
          at = s.start + math.max(s.e, e2)
        end
      end
      if at == nil then
        at = s.start + s.w + fit(s, s.curr, s.n - n)
      end
      retry = at - NOW
    end
  end
  local reset = 0
  if s.curr > 0 then
    reset = s.start + 2 * s.w - NOW
  elseif s.prev > 0 then
    reset = s.start + s.w - NOW
  end
  return math.max(s.n - s.curr - s.weighted, 0), retry, reset
end

-- settle gives back refund units of a reservation decided at rat from
-- the window it was counted in, while the estimate weighs it (the current
-- window, or the one before), and charges chg more to the current window,
-- past N if need be (see the slidingcounter package's doc).
local function settle(s, key, refund, chg, rat, reset)
  local prev, curr = s.prev, s.curr
  if refund > 0 then
    local kr = windowof(s.w, rat)
    if kr == s.k then
      curr = math.max(curr - refund, 0)
    elseif kr == s.k - 1 then
      prev = math.max(prev - refund, 0)
    end
  end
  curr = math.min(curr + chg, 2 ^ 32 - 1)
  if prev ~= s.prev or curr ~= s.curr then
    s.prev, s.curr = prev, curr
    keep(key, struct.pack("<ddd", s.k, s.prev, s.curr), s.start + 2 * s.w)
  end
end
