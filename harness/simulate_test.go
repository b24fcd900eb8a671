package harness

import (
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/workloads"
)

func TestMaxInWindow(t *testing.T) {
	w := &workloads.Workload{Params: workloads.Params{Users: 2}, Arrivals: []workloads.Arrival{
		{T: 0, User: 0, N: 1},
		{T: 500 * time.Millisecond, User: 1, N: 5},
		{T: 900 * time.Millisecond, User: 0, N: 2},
		{T: 1000 * time.Millisecond, User: 0, N: 1}, // (0, 1s] holds 3: the first has left
		{T: 1100 * time.Millisecond, User: 0, N: 4},
		{T: 1200 * time.Millisecond, User: 1, N: 1},
	}}
	all := []bool{true, true, true, true, true, true}
	if got, _, _ := maxInWindow(w, all, time.Second); got != 7 {
		t.Errorf("MaxInWindow = %d, want 7 (user 0: 2+1+4 in (0.1s, 1.1s])", got)
	}
	some := []bool{true, true, true, true, false, true}
	if got, _, _ := maxInWindow(w, some, time.Second); got != 6 {
		t.Errorf("MaxInWindow without the 4 = %d, want 6 (user 1: 5+1)", got)
	}
}

// The lab's yardsticks on the boundary attack: the ideal admits exactly N
// in any window; the fixed window 2N. It runs out of phase with the ideal:
// it admits the burst after each edge (a new window), which the ideal
// denies, and so denies the burst before the next edge, which the ideal
// admits by then.
func TestBoundaryAttackYardsticks(t *testing.T) {
	limit := limiters.Limit{N: 10, Per: time.Second}
	w, err := workloads.BoundaryAttack(workloads.Params{Seed: 1, Users: 4, Limit: limit, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ideal, err := idealOf(w, limit)
	if err != nil {
		t.Fatal(err)
	}
	if acc := judge(w, ideal, ideal, limit); acc.MaxWindowRatio != 1 || acc.FalseAllow != 0 || acc.FalseDeny != 0 {
		t.Fatalf("the ideal against itself: %+v", acc)
	}
	for _, s := range allSubjects()[:1] { // fixed-window
		d, stop, err := s.NewAt(limit)
		if err != nil {
			t.Fatal(err)
		}
		acc := judge(w, simulate(w, d), ideal, limit)
		stop()
		if acc.MaxWindowRatio != 2 || acc.FalseAllow == 0 || acc.FalseDeny == 0 || acc.Admitted <= acc.Ideal {
			t.Fatalf("fixed window under the boundary attack: %+v, want a ratio of 2, more admitted than the ideal, errors both ways", acc)
		}
	}
}

// The edge series shows the picture: under the boundary attack the fixed
// window's trailing count reaches 2N right after an edge, the ideal's never
// passes N.
func TestEdgeSeries(t *testing.T) {
	limit := limiters.Limit{N: 10, Per: time.Second}
	w, err := workloads.BoundaryAttack(workloads.Params{Seed: 1, Users: 3, Limit: limit, Duration: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ideal, _ := idealOf(w, limit)
	d, stop, _ := allSubjects()[0].NewAt(limit) // fixed-window
	defer stop()
	fixed := simulate(w, d)
	top := func(s []float64) float64 {
		m := 0.0
		for _, v := range s {
			m = max(m, v)
		}
		return m
	}
	fs, is := edgeSeries(w, fixed, time.Second, 4), edgeSeries(w, ideal, time.Second, 4)
	if top(fs.Y) != 20 || top(is.Y) != 10 {
		t.Fatalf("peak in the trailing window: fixed %v, ideal %v; want 20 and 10", top(fs.Y), top(is.Y))
	}
	// Attacker 0's requests in the first 4 windows: 20 at each of the
	// edges at 1, 2 and 3s, and the 10 just before the edge at 4s.
	if len(fs.X) != 70 || len(fs.Y) != len(fs.X) || fs.Name != "in_window" || fs.X[len(fs.X)-1] >= 4 {
		t.Fatalf("series %q of %d points (%d values) ending at %v", fs.Name, len(fs.X), len(fs.Y), fs.X[len(fs.X)-1])
	}
	// Where the most in any W is another attacker's, later, the series
	// is that attacker's around it: its peak is the table's figure.
	late := make([]bool, len(w.Arrivals))
	for i, a := range w.Arrivals {
		late[i] = a.User == 2 && a.T >= 4*time.Second && a.T < 5200*time.Millisecond
	}
	most, user, at := maxInWindow(w, late, time.Second)
	ls := edgeSeries(w, late, time.Second, 4)
	if user != 2 || at < 4*time.Second || most < 11 || top(ls.Y) != float64(most) || ls.X[0] < 2 {
		t.Errorf("most %d by user %d at %v; the series peaks at %v from %vs; want user 2's peak, from 2s on", most, user, at, top(ls.Y), ls.X[0])
	}
}
