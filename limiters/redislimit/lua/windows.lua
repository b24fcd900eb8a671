-- Windows aligned to the Unix epoch, for the algorithms that count in
-- windows (fixed window, sliding window counter): exact products and
-- quotients of integers beyond 2^53.

-- twoprod returns p and e with p + e == a * b exactly (Dekker's product,
-- for doubles without a fused multiply-add).
local function twoprod(a, b)
  local p = a * b
  local c = 134217729 * a
  local ah = c - (c - a)
  local al = a - ah
  c = 134217729 * b
  local bh = c - (c - b)
  local bl = b - bh
  return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
end

-- muldiv returns floor(a * b / c) and the remainder, exactly, for integers
-- 0 <= a, b < 2^53 and 0 < c < 2^53 whose quotient is below 2^53: a * b
-- may be far above 2^53.
local function muldiv(a, b, c)
  local q = math.floor(a * b / c)
  local p1, e1 = twoprod(a, b)
  for _ = 1, 8 do
    local p2, e2 = twoprod(q, c)
    local r = (p1 - p2) + (e1 - e2)
    if r >= 0 and r < c then
      return q, r
    end
    q = q + math.floor(r / c)
  end
  return redis.error_reply("ratelab: muldiv(" .. a .. ", " .. b .. ", " .. c .. ") did not converge")
end

-- windowof returns, for windows of w ns aligned to the Unix epoch, the
-- index of the window holding t (relative to B) and the time it starts.
local function windowof(w, t)
  local q0, r0 = muldiv(B, 1e9, w) -- B*1e9 = q0*w + r0
  local j, e = divmod(r0 + t, w)
  return q0 + j, t - e
end

-- window is windowof(w, NOW).
local function window(w)
  return windowof(w, NOW)
end
