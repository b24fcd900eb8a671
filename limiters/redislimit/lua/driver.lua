-- The driver: decide decides (consume true) or peeks cost n for the keys
-- KEYS[first+1] to KEYS[first+k], one per limit, all or nothing; limit i's
-- two numbers (N and W in ns for a window algorithm; C and T in ns for a
-- bucket algorithm) are ARGV[lp+2i-1] and ARGV[lp+2i].
--
-- It returns six integers in one string (one string costs the client one
-- allocation, an array of integers one a number): allowed (1 or 0), the
-- limit that denied (1-based; 0 when admitted), limit, remaining, retry
-- after (ns; -1 for never), reset after (ns), combined over the limits:
-- the least remaining (and its limit; of equal remaining, the smaller
-- limit), the longest retry after among the limits that deny, the longest
-- reset after. With more than one limit, four more integers a limit
-- follow, what it decided alone: admits (1 or 0), remaining, retry after
-- and reset after (as the limit stands after the decision, charged if
-- the decision admitted).
local function decide(first, k, consume, n, lp)
  if k == 1 then -- one limit: no combining, and no table of states
    local key = KEYS[first + 1]
    local s = load(key, tonumber(ARGV[lp + 1]), tonumber(ARGV[lp + 2]))
    s.ok = admits(s, n)
    if s.ok and consume then
      charge(s, key, n)
    end
    local remaining, retry, reset = describe(s, n)
    if s.ok then
      return string.format("1 0 %d %d 0 %d", s.lim, remaining, reset)
    end
    return string.format("0 1 %d %d %d %d", s.lim, remaining, retry, reset)
  end
  local st = {}
  local admit = true
  for i = 1, k do
    local s = load(KEYS[first + i], tonumber(ARGV[lp + 2 * i - 1]), tonumber(ARGV[lp + 2 * i]))
    s.ok = admits(s, n)
    admit = admit and s.ok
    st[i] = s
  end
  if admit and consume then
    for i = 1, k do
      charge(st[i], KEYS[first + i], n)
    end
  end
  local limit, remaining, retry, reset, denied
  local each = {}
  for i = 1, k do
    local s = st[i]
    local rem, ret, res = describe(s, n)
    each[i] = string.format("%d %d %d %d", s.ok and 1 or 0, rem, ret, res)
    if i == 1 or rem < remaining or (rem == remaining and s.lim < limit) then
      remaining, limit = rem, s.lim
    end
    if not admit and not s.ok then
      if denied == nil or (retry >= 0 and (ret < 0 or ret > retry)) then
        retry, denied = ret, i
      end
    end
    if i == 1 or res > reset then
      reset = res
    end
  end
  each = table.concat(each, " ")
  if admit then
    return string.format("1 0 %d %d 0 %d %s", limit, remaining, reset, each)
  end
  return string.format("0 %d %d %d %d %d %s", denied, limit, remaining, retry, reset, each)
end
