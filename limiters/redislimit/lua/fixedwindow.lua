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
    end
  end
  return s
end

local function admits(s, n)
  return n <= s.n - s.count
end

local function charge(s, key, n)
  s.count = s.count + n
  keep(key, struct.pack("<dd", s.k, s.count), s.start + s.w)
end

local function describe(s, n)
  local left = s.start + s.w - NOW
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.n then
      retry = left
    end
  end
  local reset = 0
  if s.count > 0 then
    reset = left
  end
  return s.n - s.count, retry, reset
end
