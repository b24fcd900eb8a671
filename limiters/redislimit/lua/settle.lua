-- A settle: a reservation, decided at an explicit time, given back in part
-- or charged more, under every limit; then the key's state after, as a
-- peek of one unit reports it (decide's reply). KEYS: one key per limit.
-- ARGV: 1 the units to give back, 2 the units to charge, 3 and 4 the time
-- (Unix seconds, nanoseconds), 5 the grace in ms, 6 and 7 the time the
-- reservation was decided at, then two numbers per limit, then, per limit,
-- the reservation's reset after (ns) under it.
at(ARGV[3], ARGV[4], ARGV[5])
local refund, chg, k = tonumber(ARGV[1]), tonumber(ARGV[2]), #KEYS
local rat = rel(tonumber(ARGV[6]), tonumber(ARGV[7]))
for i = 1, k do
  local s = load(KEYS[i], tonumber(ARGV[7 + 2 * i - 1]), tonumber(ARGV[7 + 2 * i]))
  settle(s, KEYS[i], refund, chg, rat, tonumber(ARGV[7 + 2 * k + i]))
end
return decide(0, k, false, 1, 7)
