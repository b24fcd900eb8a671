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
		d := l.AllowAt(r.key, at(r.t), 1)
		if d.Allowed != r.allowed {
			t.Errorf("%v row %d (%s): AllowAt(%q, %vs, 1).Allowed = %v, want %v", s, i, r.note, r.key, r.t, d.Allowed, r.allowed)
		}
		if d.Remaining != r.remaining {
			t.Errorf("%v row %d (%s): AllowAt(%q, %vs, 1).Remaining = %d, want %d", s, i, r.note, r.key, r.t, d.Remaining, r.remaining)
		}
		if !r.allowed && r.retry != 0 && d.RetryAfter != r.retry {
			t.Errorf("%v row %d (%s): AllowAt(%q, %vs, 1).RetryAfter = %v, want %v", s, i, r.note, r.key, r.t, d.RetryAfter, r.retry)
		}
	}
}

// buckets runs rows through the three bucket algorithms: one policy, so
// one table.
func buckets(t *testing.T, b bucket, rows []row) {
	for _, a := range []limiters.Algorithm{limiters.TokenBucket, limiters.LeakyBucket, limiters.GCRA} {
		t.Run(string(a), func(t *testing.T) {
			runRows(t, spec{Algorithm: a, Bucket: b}, rows)
		})
	}
}

// Seed 004, Example 1: capacity 5, 1 token per second, a request every
// half second.
func TestSeedExample1BasicRefill(t *testing.T) {
	buckets(t, bucket{Capacity: 5, Rate: 1}, []row{
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
	buckets(t, bucket{Capacity: 3, Rate: 1}, []row{
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
	buckets(t, bucket{Capacity: 10, Rate: 2}, rows)
}

// Seed 002's window edge: 2 per minute, one request at 00:00:50 and two at
// 00:01:05. The sliding algorithms (and the buckets) deny the third; the
// fixed window, whose count started over at 00:01:00, lets it through.
func TestSeedWindowEdge(t *testing.T) {
	w := window{Limit: 2, Length: time.Minute}
	b := bucket{Capacity: 2, Rate: 2.0 / 60}
	thirdAllowed := map[limiters.Algorithm]bool{limiters.FixedWindow: true}
	for _, a := range limiters.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			l, err := newMemory(spec{Algorithm: a, Window: w, Bucket: b})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			t1, t2 := at(50), at(65)
			if d := l.AllowAt("1", t1, 1); !d.Allowed {
				t.Fatalf("AllowAt(1, 00:00:50, 1).Allowed = false, want true")
			}
			if d := l.AllowAt("1", t2, 1); !d.Allowed {
				t.Fatalf("AllowAt(1, 00:01:05, 1).Allowed = false, want true")
			}
			if d := l.AllowAt("1", t2, 1); d.Allowed != thirdAllowed[a] {
				t.Fatalf("third request, AllowAt(1, 00:01:05, 1).Allowed = %v, want %v", d.Allowed, thirdAllowed[a])
			}
		})
	}
}

// The fixed window's known flaw, in seed 000's terms: 5 per 60 seconds, 5
// at 0:59 and 5 at 1:01 make 10 in two seconds. The sliding log lets none
// of the second five through.
func TestFixedWindowTwoNInTwoSeconds(t *testing.T) {
	w := window{Limit: 5, Length: time.Minute}
	for a, want := range map[limiters.Algorithm]int{limiters.FixedWindow: 10, limiters.SlidingLog: 5} {
		l, err := newMemory(spec{Algorithm: a, Window: w})
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for _, sec := range []float64{59, 61} {
			for range 5 {
				if l.AllowAt("user", at(sec), 1).Allowed {
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
