package keytable

import "testing"

// A denial of key 7 at time 10 goes in the entry that holds 7, else in
// one empty or expired, else in the one that expires first; the first
// entry wins a tie.
func TestTakesSecond(t *testing.T) {
	const h, now = 7, 10
	for _, c := range []struct {
		w1, w2 Way
		want   bool
	}{
		{Way{7, 50}, Way{0, 0}, false}, // the first holds it
		{Way{3, 50}, Way{7, 5}, true},  // the second holds it, expired or not
		{Way{0, 0}, Way{0, 0}, false},  // both empty
		{Way{3, 10}, Way{0, 0}, false}, // the first expired (at now)
		{Way{3, 50}, Way{0, 0}, true},  // the second empty
		{Way{3, 50}, Way{4, 9}, true},  // the second expired
		{Way{3, 50}, Way{4, 20}, true}, // both live: the second expires first
		{Way{3, 20}, Way{4, 50}, false},
		{Way{3, 20}, Way{4, 20}, false}, // a tie
	} {
		if got := TakesSecond(h, now, c.w1, c.w2); got != c.want {
			t.Errorf("TakesSecond(%d, %d, %+v, %+v) = %v, want %v", h, now, c.w1, c.w2, got, c.want)
		}
	}
}
