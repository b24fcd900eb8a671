-- GCRA with one limit, its TAT stored as Unix nanoseconds in decimal:
-- the parts of gcra1.lua that gcrapacked.lua calls as functions (gcra1.lua
-- keeps them written out, for the instructions each function costs).

-- tatOf reads a stored TAT, relative to B.
local function tatOf(v)
  local len = #v
  if len <= 9 then
    return tonumber(v) - B * 1e9
  end
  return (tonumber(string.sub(v, 1, len - 9)) - B) * 1e9 + tonumber(string.sub(v, len - 8))
end

-- stored is tat (relative to B) as Unix nanoseconds: divmod(tat, 1e9),
-- exactly, the seconds and the nanoseconds written side by side.
local function stored(tat)
  local s = math.floor(tat / 1e9)
  local ns = tat - s * 1e9
  if ns < 0 then
    s, ns = s - 1, ns + 1e9
  elseif ns >= 1e9 then
    s, ns = s + 1, ns - 1e9
  end
  return string.format("%d%09d", B + s, ns)
end

-- answer is the reply to a decision of cost n (ok: admitted) for a
-- capacity c and an emission interval t (ct = c * t) that left tat.
local function answer(ok, n, c, t, ct, tat)
  local debt = tat - NOW
  local remaining = 0
  if debt < ct then
    -- floor((ct - debt) / t), exactly.
    local x = ct - debt
    remaining = math.floor(x / t)
    local r = x - remaining * t
    if r < 0 then
      remaining = remaining - 1
    elseif r >= t then
      remaining = remaining + 1
    end
  end
  if ok then
    return string.format("1 0 %d %d 0 %d", c, remaining, debt)
  end
  local retry = -1
  if n <= c then
    retry = debt + n * t - ct
  end
  return string.format("0 1 %d %d %d %d", c, remaining, retry, debt)
end
