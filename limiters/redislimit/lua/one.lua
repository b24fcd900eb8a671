-- One decision. KEYS: one key per limit. ARGV: 1 mode ("a" decide and
-- consume, "p" peek), 2 cost n, 3 and 4 the time (Unix seconds,
-- nanoseconds; both empty: the server's clock), 5 the grace in ms, then
-- two numbers per limit.
at(ARGV[3], ARGV[4], ARGV[5])
return decide(0, #KEYS, ARGV[1] == "a", tonumber(ARGV[2]), 5)
