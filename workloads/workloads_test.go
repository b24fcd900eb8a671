package workloads

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
)

var limit = limiters.Limit{N: 10, Per: time.Second}

// Every generator is a pure function of its parameters: the same
// parameters give the same arrivals, another seed other arrivals; the
// arrivals are in time order, inside the duration, from the population.
func TestGeneratorsArePure(t *testing.T) {
	for _, g := range Generators {
		t.Run(g.Name, func(t *testing.T) {
			p := Params{Seed: 1, Users: 50, Limit: limit, Duration: 20 * time.Second, Costs: []Cost{{1, 3}, {4, 1}}}
			a, err := g.New(p)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := g.New(p)
			if !slices.Equal(a.Arrivals, b.Arrivals) {
				t.Fatal("the same parameters gave different arrivals")
			}
			p.Seed = 2
			c, _ := g.New(p)
			if g.Name != "boundary-attack" && slices.Equal(a.Arrivals, c.Arrivals) {
				t.Fatal("another seed gave the same arrivals")
			}
			if len(a.Arrivals) < 100 {
				t.Fatalf("only %d arrivals", len(a.Arrivals))
			}
			for i, x := range a.Arrivals {
				if x.T < 0 || x.T >= p.Duration || x.User < 0 || int(x.User) >= p.Users || x.N < 1 {
					t.Fatalf("arrival %d out of bounds: %+v", i, x)
				}
				if i > 0 && x.T < a.Arrivals[i-1].T {
					t.Fatalf("arrival %d before arrival %d", i, i-1)
				}
			}
			if k := a.Key(7); k != "user-00000000007" || len(k) != 16 {
				t.Fatalf("Key(7) = %q", k)
			}
		})
	}
}

// The uniform workload offers Load times the limit: with 50 users asking
// 1.2 x 10 per second for 100 seconds, about 60,000 requests, spread
// evenly over users and time, with the cost mix as asked.
func TestUniform(t *testing.T) {
	w, err := Uniform(Params{Seed: 3, Users: 50, Limit: limit, Duration: 100 * time.Second, Costs: []Cost{{1, 3}, {5, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	cost := 0
	per := make([]int, 50)
	halves := [2]int{}
	fives := 0
	for _, a := range w.Arrivals {
		cost += int(a.N)
		per[a.User]++
		halves[a.T/(50*time.Second)]++
		if a.N == 5 {
			fives++
		}
	}
	// Load is in units of cost: 1.2 x 10 per second x 50 users x 100s.
	if want := 60000.0; math.Abs(float64(cost)-want) > 0.03*want {
		t.Errorf("total cost %d, want about %.0f", cost, want)
	}
	for u, n := range per {
		if mean := len(w.Arrivals) / 50; n < mean*8/10 || n > mean*12/10 {
			t.Errorf("user %d asked %d times, mean %d", u, n, mean)
		}
	}
	if d := halves[0] - halves[1]; d*d > len(w.Arrivals) {
		t.Errorf("first half %d, second half %d: not steady", halves[0], halves[1])
	}
	if r := float64(fives) / float64(len(w.Arrivals)); math.Abs(r-0.25) > 0.02 {
		t.Errorf("%.3f of requests cost 5, want 0.25", r)
	}
}

// The bursty workload: each user is silent for Off after each burst of On,
// and asks at Burst times the limit while on.
func TestBursty(t *testing.T) {
	p := Params{Seed: 4, Users: 20, Limit: limit, Duration: 50 * time.Second}
	w, err := Bursty(p)
	if err != nil {
		t.Fatal(err)
	}
	byUser := map[int32][]time.Duration{}
	for _, a := range w.Arrivals {
		byUser[a.User] = append(byUser[a.User], a.T)
	}
	for u, ts := range byUser {
		// Bursts are separated by gaps of at least Off; within a burst,
		// the span is at most On.
		burstStart, bursts, inBurst := ts[0], 1, 0
		for i := 1; i < len(ts); i++ {
			if ts[i]-ts[i-1] >= 4*time.Second {
				if ts[i-1]-burstStart > time.Second {
					t.Fatalf("user %d: a burst lasted %v, want at most 1s", u, ts[i-1]-burstStart)
				}
				burstStart, bursts = ts[i], bursts+1
				continue
			}
			inBurst++
		}
		if bursts < 8 || bursts > 11 {
			t.Errorf("user %d: %d bursts in 50s, want about 10", u, bursts)
		}
		// 5 x 10 per second for 1s: about 50 a burst.
		if per := len(ts) / bursts; per < 30 || per > 70 {
			t.Errorf("user %d: %d requests a burst, want about 50", u, per)
		}
	}
}

// The boundary attack: at every edge, every attacker asks N in the Edge
// before it and N in the Edge after it, and nothing else.
// The anchored attack: each attacker's first request is its anchor a, in
// [0, W), then a full quota on each side of every other edge a + kW.
func TestAnchoredAttack(t *testing.T) {
	p := Params{Seed: 5, Users: 4, Limit: limit, Duration: 7 * time.Second}
	w, err := AnchoredAttack(p)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[int32]time.Duration{}
	type slot struct {
		k     time.Duration // the edge, a + kW
		after bool
		user  int32
	}
	count := map[slot]int{}
	for _, a := range w.Arrivals {
		at, ok := anchors[a.User]
		if !ok {
			if a.T >= time.Second || a.N != 1 {
				t.Fatalf("user %d's first request %+v: want its anchor, one request in the first window", a.User, a)
			}
			anchors[a.User] = a.T
			continue
		}
		rel := a.T - at
		edge := (rel + 10*time.Millisecond) / time.Second * time.Second
		off := rel - edge
		if off < -10*time.Millisecond || off >= 10*time.Millisecond || (off < 0 && off >= -5*time.Millisecond) || a.N != 1 || edge/time.Second%2 != 0 || edge == 0 {
			t.Fatalf("user %d's %+v is %v after its anchor %v: not within 10ms after, or 10 to 5ms before, an even edge of its own", a.User, a, rel, at)
		}
		count[slot{edge, off >= 0, a.User}]++
	}
	if len(anchors) != 4 {
		t.Fatalf("%d attackers, want 4", len(anchors))
	}
	distinct := map[time.Duration]bool{}
	for _, a := range anchors {
		distinct[a] = true
	}
	if len(distinct) < 3 {
		t.Errorf("anchors %v: want them drawn apart", anchors)
	}
	for s, n := range count {
		if n != 10 {
			t.Errorf("%+v: %d requests, want 10 (N)", s, n)
		}
	}
	// Edges 2W, 4W and 6W after the anchor, each side, for each attacker
	// whose last edge has room before the end.
	for u, a := range anchors {
		for k := 2 * time.Second; a+k+10*time.Millisecond <= p.Duration; k += 2 * time.Second {
			if count[slot{k, false, u}] != 10 || count[slot{k, true, u}] != 10 {
				t.Errorf("user %d, edge %v after its anchor: %d before, %d after, want 10 each", u, k, count[slot{k, false, u}], count[slot{k, true, u}])
			}
		}
	}
}

func TestBoundaryAttack(t *testing.T) {
	p := Params{Seed: 5, Users: 3, Limit: limit, Duration: 5 * time.Second}
	w, err := BoundaryAttack(p)
	if err != nil {
		t.Fatal(err)
	}
	// Edges at 1s, 2s, 3s, 4s (5s has no room after it): 4 edges x 3
	// attackers x 2 x 10.
	if len(w.Arrivals) != 4*3*2*10 {
		t.Fatalf("%d arrivals, want %d", len(w.Arrivals), 4*3*2*10)
	}
	type slot struct {
		edge  time.Duration
		after bool
		user  int32
	}
	count := map[slot]int{}
	for _, a := range w.Arrivals {
		edge := (a.T + 10*time.Millisecond) / time.Second * time.Second
		off := a.T - edge
		if off < -10*time.Millisecond || off >= 10*time.Millisecond || a.N != 1 {
			t.Fatalf("arrival %+v is not within 10ms of an edge", a)
		}
		count[slot{edge, off >= 0, a.User}]++
	}
	for s, n := range count {
		if n != 10 {
			t.Errorf("%+v: %d requests, want 10", s, n)
		}
	}
}

// Many users: a Zipf law, so user 0 is the busiest by far, and most of a
// large population is seen seldom.
func TestManyUsers(t *testing.T) {
	w, err := ManyUsers(Params{Seed: 6, Users: 100000, Limit: limit, Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	per := map[int32]int{}
	for _, a := range w.Arrivals {
		per[a.User]++
	}
	for u, n := range per {
		if u != 0 && n > per[0] {
			t.Fatalf("user %d asked %d times, more than user 0's %d", u, n, per[0])
		}
	}
	if share := float64(per[0]) / float64(len(w.Arrivals)); share < 0.05 {
		t.Errorf("user 0 asked for %.3f of requests, want a Zipf head of several percent", share)
	}
	if len(per) < 20000 {
		t.Errorf("only %d distinct users of 100000 seen", len(per))
	}
}

// Every generator refuses what it cannot make, with a message saying what.
func TestParamsRejected(t *testing.T) {
	for _, tt := range []struct {
		p    Params
		says string
	}{
		{Params{Users: 0, Limit: limit}, "users must be"},
		{Params{Users: 1, Limit: limiters.Limit{}}, "limit must be"},
		{Params{Users: 1, Limit: limit, Duration: -1}, "duration must be positive"},
		{Params{Users: 1, Limit: limit, Load: -1}, "must be positive and finite"},
		{Params{Users: 1, Limit: limit, Rate: math.NaN()}, "rate must be positive and finite"},
		{Params{Users: 1, Limit: limit, Zipf: 0.5}, "above 1"},
		{Params{Users: 1, Limit: limit, Costs: []Cost{{0, 1}}}, "costs must be at least 1"},
		{Params{Users: 1, Limit: limit, Costs: []Cost{{1, 0}}}, "costs must be at least 1"},
		{Params{Users: 1, Limit: limit, Edge: time.Second}, "edge at most W/2"},
	} {
		for _, g := range Generators {
			if _, err := g.New(tt.p); err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s(%+v) = %v, want an error saying %q", g.Name, tt.p, err, tt.says)
			}
		}
	}
}

// The first arrivals of every generator at seed 1, pinned: a change to how
// workloads are made is a change to every number the lab reports, and must
// be made on purpose (go test -update).
func TestGeneratorsGolden(t *testing.T) {
	var b strings.Builder
	for _, g := range Generators {
		w, err := g.New(Params{Seed: 1, Users: 1000, Limit: limit, Duration: 30 * time.Second, Costs: []Cost{{1, 9}, {3, 1}}})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %d arrivals\n", g.Name, len(w.Arrivals))
		for _, a := range w.Arrivals[:8] {
			fmt.Fprintf(&b, "\t%v %d %d\n", a.T, a.User, a.N)
		}
	}
	path := filepath.Join("testdata", "generators.golden")
	if *update {
		os.WriteFile(path, []byte(b.String()), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("generated arrivals changed:\n%s\nwant:\n%s", b.String(), want)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files")

func TestFromTrace(t *testing.T) {
	w, err := FromTrace(NewTraceReader(strings.NewReader("0,b\n1,a,3\n2,b\n")))
	if err != nil {
		t.Fatal(err)
	}
	want := []Arrival{{0, 0, 1}, {time.Second, 1, 3}, {2 * time.Second, 0, 1}}
	if !slices.Equal(w.Arrivals, want) || w.Key(0) != "b" || w.Key(1) != "a" || w.Params.Users != 2 {
		t.Fatalf("FromTrace = %+v users %d, want %+v with b then a", w.Arrivals, w.Params.Users, want)
	}
}

// The LLM workload: the same parameters give the same requests; actual
// tokens have the mean asked for (log-normal: the median below it), lie
// within 1 and the max, and take their time at the speed asked for; the
// estimate is the mean unless given; bad parameters are refused, naming
// what is wrong.
func TestLLM(t *testing.T) {
	p := LLMParams{Seed: 3, Users: 40, Duration: time.Hour, Limit: limiters.Limit{N: 10_000, Per: time.Minute},
		Load: 1.5, Mean: 500, Spread: 1, Max: 100_000, TokensPerSecond: 100}
	w, err := LLM(p)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := LLM(p)
	if !slices.Equal(w.Arrivals, again.Arrivals) || !slices.Equal(w.After, again.After) || len(w.After) != len(w.Arrivals) {
		t.Fatal("two workloads of the same parameters differ")
	}
	var sum float64
	var costs []int32
	for i, a := range w.Arrivals {
		x := w.After[i]
		if a.N != 500 || x.Actual < 1 || x.Actual > 100_000 || x.Took != time.Duration(float64(x.Actual)/100*1e9) || i > 0 && a.T < w.Arrivals[i-1].T {
			t.Fatalf("request %d: %+v, %+v", i, a, x)
		}
		sum += float64(x.Actual)
		costs = append(costs, x.Actual)
	}
	// 1.5 times 10,000 tokens a minute for 40 users over an hour, at 500
	// a request: 72,000 requests.
	if n := len(w.Arrivals); n < 70_000 || n > 74_000 {
		t.Errorf("%d requests, want about 72,000", n)
	}
	slices.Sort(costs)
	if mean, median := sum/float64(len(costs)), costs[len(costs)/2]; mean < 485 || mean > 515 || median < 290 || median > 316 {
		t.Errorf("mean %.1f, median %d; want about 500 and 303 (500/e^0.5)", mean, median)
	}
	p.Estimate = 120
	if w, _ := LLM(p); w.Arrivals[0].N != 120 {
		t.Errorf("estimate %d, want 120", w.Arrivals[0].N)
	}
	for _, bad := range []func(*LLMParams){
		func(p *LLMParams) { p.Spread = -1 },
		func(p *LLMParams) { p.Max = 10 },
		func(p *LLMParams) { p.Estimate = 200_000 },
		func(p *LLMParams) { p.TokensPerSecond = 0 },
		func(p *LLMParams) { p.Users = 0 },
	} {
		q := p
		bad(&q)
		if _, err := LLM(q); err == nil || !strings.Contains(err.Error(), "workloads: llm:") {
			t.Errorf("%+v: %v", q, err)
		}
	}
}
