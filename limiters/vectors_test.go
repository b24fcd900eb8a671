package limiters_test

import (
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

// The worked examples of the seed documents, row by row. Times are
// seconds from an instant at a window edge (time zero, for explicit times).

type row struct {
	t         float64 // seconds
	key       string
	allowed   bool
	remaining int           // tokens left after the request, rounded down
	retry     time.Duration // for denials
	note      string
}

func at(sec float64) time.Time { return time.Unix(0, int64(sec*1e9)) }

func runRows(t *testing.T, s spec, rows []row) {
	t.Helper()
	l, err := newMemory(s)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, r := range rows {
		d, err := l.Decide(t.Context(), limiters.Request{Key: r.key, N: 1, At: at(r.t)})
		if err != nil {
			t.Fatalf("%v row %d (%s): Decide(%q, %vs, 1): %v", s, i, r.note, r.key, r.t, err)
		}
		if d.Allowed != r.allowed {
			t.Errorf("%v row %d (%s): Decide(%q, %vs, 1).Allowed = %v, want %v", s, i, r.note, r.key, r.t, d.Allowed, r.allowed)
		}
		if d.Remaining != r.remaining {
			t.Errorf("%v row %d (%s): Decide(%q, %vs, 1).Remaining = %d, want %d", s, i, r.note, r.key, r.t, d.Remaining, r.remaining)
		}
		if !r.allowed && r.retry != 0 && d.RetryAfter != r.retry {
			t.Errorf("%v row %d (%s): Decide(%q, %vs, 1).RetryAfter = %v, want %v", s, i, r.note, r.key, r.t, d.RetryAfter, r.retry)
		}
	}
}

// buckets runs rows through the three bucket algorithms: one policy, so
// one table.
func buckets(t *testing.T, lim limiters.Limit, rows []row) {
	for _, a := range []limiters.Algorithm{limiters.TokenBucket, limiters.LeakyBucket, limiters.GCRA} {
		t.Run(string(a), func(t *testing.T) {
			runRows(t, spec{Algorithm: a, Limit: lim}, rows)
		})
	}
}

// Seed 004, Example 1: capacity 5, 1 token per second, a request every
// half second.
func TestSeedExample1BasicRefill(t *testing.T) {
	buckets(t, limiters.Limit{N: 1, Per: time.Second, Burst: 5}, []row{
		{0.0, "alice", true, 4, 0, "5.0 tokens, take 1"},
		{0.5, "alice", true, 3, 0, "4.0 + 0.5 = 4.5, take 1: 3.5"},
		{1.0, "alice", true, 3, 0, "3.5 + 0.5 = 4.0, take 1: 3.0"},
		{1.5, "alice", true, 2, 0, "2.5 left"},
		{2.0, "alice", true, 2, 0, "2.0 left"},
		{2.5, "alice", true, 1, 0, "1.5 left"},
		{3.0, "alice", true, 1, 0, "1.0 left"},
		{3.5, "alice", true, 0, 0, "0.5 left"},
		{4.0, "alice", true, 0, 0, "0.0 left"},
		{4.5, "alice", false, 0, 500 * time.Millisecond, "0.5 refilled is not a token: denied, 0.5s to go"},
		{5.5, "alice", true, 0, 0, "0.5 + 1.0 = 1.5, take 1: 0.5"},
	})
}

// Seed 004, Example 2: two users, capacity 3, 1 per second; Alice's
// exhaustion leaves Bob untouched.
func TestSeedExample2Independence(t *testing.T) {
	buckets(t, limiters.Limit{N: 1, Per: time.Second, Burst: 3}, []row{
		{0.0, "alice", true, 2, 0, ""},
		{0.0, "alice", true, 1, 0, ""},
		{0.0, "alice", true, 0, 0, "Alice's bucket is empty"},
		{0.0, "alice", false, 0, time.Second, "denied, a second to the next token"},
		{0.0, "bob", true, 2, 0, "Bob's bucket is full"},
		{1.0, "alice", true, 0, 0, "one token refilled"},
		{1.0, "bob", true, 2, 0, "2 + 1 = 3 (the cap), take 1"},
	})
}

// Seed 004, Example 3: a burst of ten, then one request every half second
// at a refill of two per second: exactly sustainable.
func TestSeedExample3BurstThenSteady(t *testing.T) {
	var rows []row
	for i := range 10 {
		rows = append(rows, row{0, "charlie", true, 9 - i, 0, "burst"})
	}
	for _, sec := range []float64{0.5, 1.0, 1.5, 2.0} {
		rows = append(rows, row{sec, "charlie", true, 0, 0, "steady: one token refills per request"})
	}
	// Three a second is one too many: the third within a second is denied.
	rows = append(rows,
		row{2.0 + 1.0/3, "charlie", false, 0, time.Second/6 + 1, "2/3 token: denied"},
		row{2.5, "charlie", true, 0, 0, "one token"},
	)
	buckets(t, limiters.Limit{N: 2, Per: time.Second, Burst: 10}, rows)
}

// Seed 002's window edge: 2 per minute, one request at 00:00:50 and two at
// 00:01:05. The sliding algorithms (and the buckets) deny the third; the
// fixed window, whose count started over at 00:01:00, lets it through.
// (For a bucket, 2 per minute is a burst of 2 refilled one every 30s.)
func TestSeedWindowEdge(t *testing.T) {
	lim := limiters.Limit{N: 2, Per: time.Minute}
	thirdAllowed := map[limiters.Algorithm]bool{limiters.FixedWindow: true}
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			l, err := newMemory(spec{Algorithm: a, Limit: lim})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := t.Context()
			t1, t2 := at(50), at(65)
			if d, err := l.Decide(ctx, limiters.Request{Key: "1", N: 1, At: t1}); err != nil || !d.Allowed {
				t.Fatalf("Decide(1, 00:00:50, 1).Allowed = false (%v), want true", err)
			}
			if d, err := l.Decide(ctx, limiters.Request{Key: "1", N: 1, At: t2}); err != nil || !d.Allowed {
				t.Fatalf("Decide(1, 00:01:05, 1).Allowed = false (%v), want true", err)
			}
			if d, err := l.Decide(ctx, limiters.Request{Key: "1", N: 1, At: t2}); err != nil || d.Allowed != thirdAllowed[a] {
				t.Fatalf("third request, Decide(1, 00:01:05, 1).Allowed = %v (%v), want %v", d.Allowed, err, thirdAllowed[a])
			}
		})
	}
}

// The fixed window's known flaw, in seed 000's terms: 5 per 60 seconds, 5
// at 0:59 and 5 at 1:01 make 10 in two seconds. The sliding log lets none
// of the second five through.
func TestFixedWindowTwoNInTwoSeconds(t *testing.T) {
	lim := limiters.Limit{N: 5, Per: time.Minute}
	for a, want := range map[limiters.Algorithm]int{limiters.FixedWindow: 10, limiters.SlidingLog: 5} {
		l, err := newMemory(spec{Algorithm: a, Limit: lim})
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for _, sec := range []float64{59, 61} {
			for range 5 {
				d, err := l.Decide(t.Context(), limiters.Request{Key: "user", N: 1, At: at(sec)})
				if err != nil {
					t.Fatalf("%s: Decide(user, %vs, 1): %v", a, sec, err)
				}
				if d.Allowed {
					admitted++
				}
			}
		}
		l.Close()
		if admitted != want {
			t.Errorf("%s: %d admitted of 5 at 0:59 and 5 at 1:01, want %d", a, admitted, want)
		}
	}
}
