-- Token bucket: the key holds the time of the last refill (Unix seconds
-- and nanoseconds) and the tokens, in nanoseconds of refill (tokens*T).
local function load(key, c, t)
  local s = {lim = c, c = c, t = t, ct = c * t, tokens = c * t, last = NOW}
  local v = redis.call("GET", key)
  if v then
    local sec, ns, tokens = struct.unpack("<IId", v)
    s.last, s.tokens = rel(sec, ns), tokens
    if NOW > s.last then
      s.tokens = math.min(s.ct, s.tokens + (NOW - s.last))
      s.last = NOW
    end
  end
  return s
end

local function admits(s, n)
  return n <= s.c and s.tokens >= n * s.t
end

local function charge(s, key, n)
  s.tokens = s.tokens - n * s.t
  local sec, ns = abs(s.last)
  keep(key, struct.pack("<IId", sec, ns, s.tokens), s.last + s.ct - s.tokens)
end

local function describe(s, n)
  local retry = 0
  if not s.ok then
    retry = -1
    if n <= s.c then
      retry = s.last + n * s.t - s.tokens - NOW
    end
  end
  return (divmod(s.tokens, s.t)), retry, s.last + s.ct - s.tokens - NOW
end
