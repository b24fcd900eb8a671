-- ratelab's Redis backend. Every algorithm's script is this prelude,
-- helpers.lua, the algorithm, driver.lua (decide: n for one key against
-- every limit, all or nothing), then one.lua (one decision) or many.lua
-- (a batch of them). GCRA with one limit has a decide of its own,
-- gcrasingle.lua (or gcratat.lua and gcrapacked.lua, its keys packed in
-- hashes), in place of the helpers, the algorithm and the driver.
--
-- Lua numbers are doubles: integers are exact up to 2^53. A Unix time in
-- nanoseconds (about 1.8e18) is not, so a time is handled as nanoseconds
-- relative to B, the whole Unix second of the decision; every period is
-- at most 2^52 ns (52 days), so every time a decision needs fits. Stored
-- times are split into seconds and nanoseconds.
--
-- A decision's time and grace (B, NOW, GRACE) are set by at before it is
-- made; the functions below read them.
local B, NOW, GRACE
local TB, TNOW -- the server's clock, read once a run
local GS -- the string GRACE was read from (a batch passes the same one)

-- at sets the decision's time, sec seconds and ns nanoseconds after the
-- Unix epoch (both empty: the server's clock), and its grace, the
-- milliseconds a key outlives the moment its quota is full again.
local function at(sec, ns, grace)
  if sec == "" then
    if not TB then
      local tm = redis.call("TIME")
      TB, TNOW = tonumber(tm[1]), tonumber(tm[2]) * 1000
    end
    B, NOW = TB, TNOW
  else
    B, NOW = tonumber(sec), tonumber(ns)
  end
  if grace ~= GS then
    GS, GRACE = grace, tonumber(grace)
  end
end
