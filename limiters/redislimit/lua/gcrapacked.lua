-- GCRA with one limit, its keys packed: many callers' keys share one Redis
-- hash (KEYS[first + 1]), each a field (ARGV[lp + 3]) holding its
-- theoretical arrival time (TAT). Otherwise it decides as gcrasingle.lua does.
-- A key of its own costs Redis about 100 bytes whatever it holds; a field
-- of a small hash costs its name and value and a few bytes.
--
-- Expiry: the hash expires when its last field's quota is full again,
-- plus the grace; a field whose quota has been full for the grace holds
-- nothing its absence does not, and is deleted when found: before a new
-- field is added, two fields drawn at random are looked at, as Redis
-- itself samples keys to expire them.
local function decide(first, k, consume, n, lp)
  local key, field = KEYS[first + 1], ARGV[lp + 3]
  local c, t = tonumber(ARGV[lp + 1]), tonumber(ARGV[lp + 2])
  local ct = c * t
  local tat = NOW
  local v = redis.call("HGET", key, field)
  if v then
    tat = math.max(tat, tatOf(v))
  end
  if n > c or tat + n * t - NOW > ct then
    return NOW - tat - 1 -- denied: -debt-1 (see gcrasingle.lua)
  end
  if consume then
    if not v then
      local drawn = redis.call("HRANDFIELD", key, 2, "WITHVALUES")
      for i = 1, #drawn, 2 do
        if tatOf(drawn[i + 1]) + GRACE * 1e6 <= NOW then
          redis.call("HDEL", key, drawn[i])
        end
      end
    end
    tat = tat + n * t
    redis.call("HSET", key, field, stored(tat))
    -- The hash lives as long as its longest-lived field.
    local ms = math.max(math.ceil((tat - NOW) / 1e6), 0) + GRACE
    if redis.call("PTTL", key) < ms then
      redis.call("PEXPIRE", key, ms)
    end
  end
  return tat - NOW
end
