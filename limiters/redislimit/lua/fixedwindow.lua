-- Fixed window: the key holds the window's index k (the window is
-- [k*W, (k+1)*W) in Unix nanoseconds) and the count spent in it.
local function load(key, n, w)
  local k, start = window(w)
  local s = {lim = n, n = n, w = w, k = k, start = start, count = 0}
  local v = redis.call("GET", key)
  if v then
    local sk, count = struct.unpack("<dd", v)
    if sk >= k then -- the current window, or a later one when the clock stepped back
      s.start = start + (sk - k) * w
      s.k, s.count = sk, count
    elseif count > n then -- debt (a settle's charge), paid N a window
      s.count = math.max(count - n * (k - sk), 0)
    end
  end
  return s
end

-- windows is how many windows a count of c takes to clear, N a window.
local function windows(s, c)
  return math.ceil(c / s.n)
end

local function admits(s, n)
  return n <= s.n - s.count
end

local function charge(s, key, n)
  s.count = s.count + n
  keep(key, struct.pack("<dd", s.k, s.count), s.start + windows(s, s.count) * s.w)
end

local function describe(s, n)
  local left = s.start + s.w - NOW
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.n then
      retry = left
      if s.count > s.n then -- in debt: the window the debt leaves room for n in
        retry = s.start + windows(s, s.count + n - s.n) * s.w - NOW
      end
    end
  end
  local reset = 0
  if s.count > 0 then
    reset = s.start + windows(s, s.count) * s.w - NOW
  end
  return math.max(s.n - s.count, 0), retry, reset
end

-- settle gives back refund units of a reservation decided at rat, if its
-- window is the current one, and charges chg more to the current window,
-- past N if need be (see the fixedwindow package's doc).
local function settle(s, key, refund, chg, rat, reset)
  local count = s.count
  if refund > 0 and windowof(s.w, rat) == s.k then
    count = math.max(count - refund, 0)
  end
  -- At most N a window for as many whole windows as MAXDEBT holds (at
  -- least one), and at most MAXDEBT: every window edge stays exact.
  local most = math.min(s.n * math.max(math.floor(MAXDEBT / s.w), 1), MAXDEBT)
  count = math.min(count + math.min(chg, most), most)
  if count ~= s.count then
    s.count = count
    keep(key, struct.pack("<dd", s.k, s.count), s.start + windows(s, s.count) * s.w)
  end
end
