package plan

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/composite"
	"github.com/ratelab/ratelab/products"
)

// The policy chosen, decided again by the library's limiters over the
// requests the plan kept: what it refuses, in requests.

// decideCurves decides, each on a core, what the frontier's buckets, the
// bucket suggested and the windows (as each window algorithm tried, and
// as nginx writes them) refuse of the users.
func (p *Plan) decideCurves(cs *clients, decided kept, users []int32) {
	c := p.Config
	keys, in := cs.keys(), make([]bool, len(cs.all))
	for _, id := range users {
		in[id] = true
	}
	// The bucket suggested, and the frontier's points within ten times
	// its rate either way, the answer's neighbours (the rest, six more
	// passes over the shop's 10 million requests, are left undecided:
	// the curves say whom each refuses exactly).
	points := []*FrontierPoint{&p.Bucket}
	for i := range p.Frontier {
		f := &p.Frontier[i]
		if r := perSecond(f.Rate) / perSecond(p.Bucket.Rate); r > 10.01 || r < 1/10.01 {
			f.Refused, f.decidedClients = -1, -1
			continue
		}
		points = append(points, f)
	}
	work := make(chan func())
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	// Each decided over the keys it may refuse (candidates.go), from the
	// requests of the keys any of them may refuse, taken from the log's
	// once (each policy's own pass over every request of the shop was a
	// tenth of a plan's time).
	p.decideProducts(keys, &decided)
	may := p.cv.mayRefuseAny(in, p.policiesDecided(points))
	decided = decided.only(may)
	decide := func(a limiters.Algorithm, limits ...limiters.Limit) (int64, int64) {
		return refusedBy(a, limits, decided, keys, only(may, p.cv.mayRefuse(a, limits)))
	}
	for _, f := range points {
		work <- func() { f.Refused, f.decidedClients = decide(limiters.GCRA, f.Policy()) }
	}
	if w := &p.Windows; w.Short.N > 0 {
		work <- func() { w.Refused, w.decidedClients = decide(limiters.SlidingLog, w.Short, w.Long) }
		// The same pair on the other window algorithms, decided: a pair
		// suggested as a separation refuses the same keys in each form.
		for _, a := range []limiters.Algorithm{limiters.FixedWindow, limiters.SlidingCounter} {
			if slices.Contains(c.Algorithms, a) {
				o := &WindowPair{Algorithm: a, Short: w.Short, Long: w.Long}
				p.WindowsOthers = append(p.WindowsOthers, o)
				work <- func() { o.Refused, o.Clients = decide(a, o.Short, o.Long) }
			}
		}
	}
	close(work)
	wg.Wait()
	// nginx decided through its own model (its clock of milliseconds,
	// its rate in thousandths), over the keys the buckets it enforces
	// may refuse.
	p.nginxPolicy(func(rules ...products.NginxRule) (int64, int64) {
		var rs []products.Rule
		for _, r := range rules {
			rs = append(rs, r)
		}
		return refusedByModel(products.Nginx{}, rs, decided, only(may, p.cv.mayRefuse(limiters.GCRA, nginxEnforced(rules))))
	})
}

// nginxEnforced are the buckets nginx keeps of rules.
func nginxEnforced(rules []products.NginxRule) []limiters.Limit {
	var ls []limiters.Limit
	for _, r := range rules {
		ls = append(ls, r.Enforced)
	}
	return ls
}

// refusedByModel is refusedBy of a product's rules, each key's requests
// decided through the product's model.
func refusedByModel(prod products.Product, rules []products.Rule, decided kept, in []bool) (requests, clients int64) {
	// Each key's state by its number (in holds one a key), and whether it
	// was refused.
	state, hit := make([]products.Key, len(in)), make([]bool, len(in))
	decided.each(in, func(r keptRequest) {
		k := state[r.id]
		if k == nil {
			k = prod.NewKey(rules)
			state[r.id] = k
		}
		if !k.Decide(r.at).Admitted {
			requests++
			if !hit[r.id] {
				hit[r.id], clients = true, clients+1
			}
		}
	})
	return requests, clients
}

// refusedBy is how many of the requests decided of the clients in (by
// number) algorithm a at limits refuses (composite, each key its own),
// and of how many clients.
func refusedBy(a limiters.Algorithm, limits []limiters.Limit, decided kept, keys []string, in []bool) (requests, clients int64) {
	l, err := composite.New(a, limits, limiters.WithSweepInterval(-1))
	if err != nil {
		return -1, -1
	}
	defer l.Close()
	hit := make([]bool, len(keys))
	decided.each(in, func(r keptRequest) {
		d, err := l.Decide(context.Background(), limiters.Request{Key: keys[r.id], N: int(r.n), At: time.Unix(0, r.at)})
		if err != nil || !d.Allowed {
			requests++
			if !hit[r.id] {
				hit[r.id], clients = true, clients+1
			}
		}
	})
	return requests, clients
}
