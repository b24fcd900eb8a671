package probe

import (
	"testing"
	"time"
)

// The in-flight model judged on recorded instants: a burst of six at
// once of which four were admitted (answered 150ms on) and two refused
// at once, one more refused at 75ms while the four were in flight, and
// the next four admitted once their answers were back, on one key; and a
// fresh key's request admitted at 75ms. Four per key explains all; three
// fails the fourth admission of each burst, five the refusals, and four
// for all keys the fresh key's admission and the second burst's fourth,
// which b was in flight beside.
func TestInFlightExplains(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Millisecond))) }
	var obs []observation
	add := func(key string, sent, back float64, admitted bool) {
		obs = append(obs, observation{Key: key, N: 1, Sent: ms(sent), Received: ms(back), Admitted: admitted})
	}
	for i := range 6 {
		at := 0.1 * float64(i)
		if i < 4 {
			add("a", at, at+150.3, true)
		} else {
			add("a", at, at+0.4, false)
		}
	}
	add("a", 75, 75.3, false)
	add("b", 75, 225.4, true)
	for i := range 4 {
		add("a", 160+0.1*float64(i), 310.5, true)
	}
	u := time.Millisecond
	hs := heldAt(obs, u)
	for _, tt := range []struct {
		m    inFlightModel
		want int
	}{
		{inFlightModel{k: 4}, len(obs)},
		{inFlightModel{k: 3}, len(obs) - 2},               // the fourth of each burst
		{inFlightModel{k: 5}, len(obs) - 3},               // the three refusals
		{inFlightModel{k: 4, shared: true}, len(obs) - 2}, // b's, and the fourth of the second burst beside b
	} {
		if got := tt.m.explain(hs); got != tt.want {
			t.Errorf("%s explains %d of %d, want %d", tt.m, got, len(obs), tt.want)
		}
	}
	if m, n := fitInFlight(obs, 8, u); m != (inFlightModel{k: 4}) || n != len(obs) {
		t.Errorf("fit %s explaining %d, want %s explaining all %d", m, n, inFlightModel{k: 4}, len(obs))
	}
	// A refusal with nothing in flight is no limit in flight's.
	add("c", 400, 400.3, false)
	if _, n := fitInFlight(obs, 8, u); n != len(obs)-1 {
		t.Errorf("explained %d of %d, want all but the lone refusal", n, len(obs))
	}
}
