package redislimit

import (
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters/redistest"
)

// runLua runs body after the prelude and the window arithmetic, at time sec.ns, and returns its
// integer reply.
func runLua(t *testing.T, body string, sec, ns int64, args ...any) []int64 {
	t.Helper()
	c := redistest.Client(t, nil)
	argv := append([]any{"p", 1, sec, ns, 0}, args...)
	v, err := c.Eval(t.Context(), prelude+helpers+windows+"at(ARGV[3], ARGV[4], ARGV[5])\n"+body, nil, argv...).Result()
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	var out []int64
	for _, e := range v.([]any) {
		out = append(out, e.(int64))
	}
	return out
}

// TestMulDiv checks the scripts' exact a*b/c against Go's 128-bit
// arithmetic, products far above 2^53 included.
func TestMulDiv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	type tc struct{ a, b, c uint64 }
	var cases []tc
	lim := uint64(1) << 53
	for range 300 {
		c := 1 + r.Uint64N(lim-1)
		a := r.Uint64N(min(c, 1<<31) + 1) // a <= c: the quotient is below 2^53
		b := r.Uint64N(lim)
		if r.IntN(4) == 0 {
			b = c - r.Uint64N(3) // around one whole c: remainders of 0 and small ones
		}
		cases = append(cases, tc{a, b, c})
	}
	cases = append(cases, tc{1<<31 - 1, 1<<52 - 1, 1<<52 - 1}, tc{4294967295, 1e9, 1000}, tc{3, 1<<52 + 1, 1<<52 + 3}, tc{0, 5, 7})
	var args []any
	for _, c := range cases {
		args = append(args, c.a, c.b, c.c)
	}
	got := runLua(t, `local out = {}
for i = 6, #ARGV, 3 do
  local q, r = muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
  out[#out + 1] = q
  out[#out + 1] = r
end
return out`, 1, 0, args...)
	for i, c := range cases {
		hi, lo := bits.Mul64(c.a, c.b)
		q, rem := bits.Div64(hi, lo, c.c)
		if uint64(got[2*i]) != q || uint64(got[2*i+1]) != rem {
			t.Errorf("muldiv(%d, %d, %d) = %d r %d, want %d r %d", c.a, c.b, c.c, got[2*i], got[2*i+1], q, rem)
		}
	}
}

// TestWindowIndex checks the scripts' window index and start, from a Unix
// time kept as seconds and nanoseconds, against Go's int64 division.
func TestWindowIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	for range 200 {
		w := int64(time.Microsecond) + r.Int64N(int64(MaxPeriod))
		if r.IntN(3) == 0 {
			w = int64(time.Microsecond) + r.Int64N(int64(time.Second))
		}
		at := time.Unix(r.Int64N(1<<32), r.Int64N(1e9))
		got := runLua(t, `local k, start = window(tonumber(ARGV[6])) return {k, start}`, at.Unix(), int64(at.Nanosecond()), w)
		ns := at.UnixNano()
		k := ns / w
		start := k*w - at.Unix()*1e9 // relative to the decision's second
		if got[0] != k || got[1] != start {
			t.Errorf("window(%d) at %d.%09d = %d from %d, want %d from %d", w, at.Unix(), at.Nanosecond(), got[0], got[1], k, start)
		}
	}
}
