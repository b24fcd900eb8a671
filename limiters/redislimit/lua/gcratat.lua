-- GCRA with one limit, its TAT stored as Unix nanoseconds in decimal:
-- the parts of gcrasingle.lua that gcrapacked.lua and gcrapackedsettle.lua
-- call as functions (gcrasingle.lua keeps them written out, for the
-- instructions each function costs).

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
