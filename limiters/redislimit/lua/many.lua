-- A batch of decisions, one after the other, in one run: what one.lua
-- would decide for each, for a fraction of the server's work. ARGV: 1 the
-- number of decisions m, 2 the number of limits k, 3 and 4 the grace in ms
-- for decisions at the server's clock and at explicit times, then two
-- numbers per limit, then one argument per decision: its cost n, negative
-- to peek, alone for the server's clock or followed by " sec ns" for an
-- explicit time. KEYS: k keys per decision, decision by decision. Reply:
-- the decisions' replies, joined by commas (a reply that is a number,
-- gcrasingle.lua's, written in full: tostring would round it to 14 digits).
-- Decisions at the server's clock are all made at the one instant the
-- batch reads it.
local m, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local first = 5 + 2 * k
local out = {}
for j = 0, m - 1 do
  local arg = ARGV[first + j]
  local n = tonumber(arg)
  if n then
    at("", "", ARGV[3])
  else
    local cost, sec, ns = string.match(arg, "^(-?%d+) (%d+) (%d+)$")
    n = tonumber(cost)
    at(sec, ns, ARGV[4])
  end
  local consume = n > 0
  if not consume then
    n = -n
  end
  local r = decide(j * k, k, consume, n, 4)
  if type(r) == "number" then
    r = string.format("%d", r)
  end
  out[j + 1] = r
end
return table.concat(out, ",")
