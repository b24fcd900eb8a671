package harness

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/harness/peers"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redistest"
	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/results/report"
)

// redisURL is the test server's URL and a client of it (package
// redistest; the test fails without one).
func redisURL(t *testing.T) (string, *redis.Client) {
	t.Helper()
	return redistest.URL(), redistest.Client(t, nil)
}

// quiet drops go-redis's log lines: a server that does not answer is the
// lab's to report, in its results.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A small lab with subjects on Redis: on the same sample of a workload
// they decide as the same algorithm in memory does, and their accuracy is
// what that decides; they run in real time and are weighed, are not
// timed, and leave no key behind.
func TestLabRedis(t *testing.T) {
	// A server of its own: the lab weighs a key by the growth of the
	// server's used_memory, which other tests' keys move (beside the Redis
	// package's tests, deleting theirs, GCRA's keys once weighed 22.6
	// bytes each).
	addr := redistest.Own(t)
	url := "redis://" + addr + "/0"
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c := smallLab()
	c.Redis.URL = url
	c.Limiters = []string{"sliding-counter", "gcra", redisName(limiters.SlidingCounter), redisName(limiters.GCRA), redisRateName, redisFloorName, redisBatchedFloorName}
	c.Workloads = []string{"uniform", "boundary-attack", "many-users"}
	c.Redis.Users, c.Redis.Simulated, c.Redis.Keys = 4, 3*time.Second, 2000
	c.Redis.RealTime, c.Redis.LatencyTime = 20*time.Millisecond, 50*time.Millisecond
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.Defaults()
	if set := f.Meta.Setting; set("redis-users") != "4" || set("redis-keys") != "2000" || !strings.HasPrefix(set("redis-prefix"), "ratelab:bench:") {
		t.Fatalf("the Redis settings: %v", f.Meta.Settings)
	}
	onRedis := []string{redisName(limiters.SlidingCounter), redisName(limiters.GCRA), redisRateName}
	seen := map[string]int{} // by mode, or "skipped"
	for _, r := range f.Rows {
		if !slices.Contains(onRedis, r.Limiter) {
			continue
		}
		if !r.Outside() {
			t.Errorf("%s on %s: backend %q, want redis", r.Limiter, r.Workload, r.Backend)
		}
		switch {
		case r.Skipped != "":
			seen["skipped"]++
			timing := strings.HasPrefix(r.Skipped, "not timed")
			accuracy := r.Workload == "many-users" || r.Limiter == redisRateName
			if !timing && !(accuracy && strings.HasPrefix(r.Skipped, "accuracy")) {
				t.Errorf("%s on %s skipped: %s", r.Limiter, r.Workload, r.Skipped)
			}
		case r.Mode == simulatedModeName:
			seen[r.Mode]++
			w, err := c.Workload(r.Workload)
			if err != nil {
				t.Fatal(err)
			}
			sw := sample(w, c.Redis.Users, c.Redis.Simulated)
			m, stop, err := newInMemory(limiters.Algorithm(r.Algorithm), c.Limit)
			if err != nil {
				t.Fatal(err)
			}
			ideal, _ := idealOf(sw, c.Limit)
			want := judge(sw, simulate(sw, m), ideal, c.Limit)
			stop()
			differs, checked := r.Value(results.DiffersFromMemory)
			n := r.Count(results.Decisions)
			if !checked || differs != 0 || accuracyOf(r) != want || n != int64(len(sw.Arrivals)) {
				t.Errorf("%s on %s: %d decisions, %v (%v) differing from memory, accuracy %+v; want %d, 0 and %+v",
					r.Limiter, r.Workload, n, differs, checked, accuracyOf(r), len(sw.Arrivals), want)
			}
			if a := accuracyOf(r).Admitted; a == 0 || a == n {
				t.Errorf("%s on %s admitted %d of %d: the sample should be over the limit", r.Limiter, r.Workload, a, n)
			}
		case r.Mode == realTimeModeName:
			seen[r.Mode]++
			if r.Get(results.Throughput) <= 0 || !r.Has(results.Latency+".p50") || r.Get(results.Decisions) == 0 || r.Note == "" {
				t.Errorf("%s on %s in real time: %+v", r.Limiter, r.Workload, r)
			}
			if o := r.SettingFloat(results.Offered); o != 0 && o != c.Redis.OfferedRate {
				t.Errorf("%s paced at %v, want %v", r.Limiter, o, c.Redis.OfferedRate)
			}
		case r.Mode == memoryModeName:
			seen[r.Mode]++
			// A key, its name (60 to 80 bytes here) and a value: a hundred
			// bytes or a few hundred, not nothing and not kilobytes.
			if b := r.Get(results.BytesPerUser); r.Get(users) != 2000 || b < 60 || b > 2000 {
				t.Errorf("%s weighed %v keys at %.1f bytes each", r.Limiter, r.Get(users), b)
			}
		default:
			t.Errorf("%s on %s: mode %q", r.Limiter, r.Workload, r.Mode)
		}
	}
	// Accuracy: two of three subjects on two of three workloads; real
	// time: three subjects, three workloads, two sweeps and a paced run;
	// memory: each subject; skipped: timing everywhere, the accuracy of
	// redis_rate and of many-users.
	want := map[string]int{simulatedModeName: 2 * 2, realTimeModeName: 3 * 3 * 3, memoryModeName: 3, "skipped": 3*3 + 3 + 2}
	for k, n := range want {
		if seen[k] != n {
			t.Errorf("%d Redis runs %s, want %d (all: %v)", seen[k], k, n, seen)
		}
	}
	// The floors: in real time only, each sweep and the paced run on each
	// workload, admitting everything, left out of the picks.
	floors := 0
	for _, r := range f.Rows {
		if r.Limiter != redisFloorName && r.Limiter != redisBatchedFloorName {
			continue
		}
		floors++
		if a, ok := r.Value(admitted); r.Mode != realTimeModeName || !r.IsFloor() || !r.Outside() || r.Skipped != "" || !(r.Get(results.Throughput) > 0) || !ok || a != 1 {
			t.Errorf("%s on %s (%s): %+v, want a real-time run admitting everything", r.Limiter, r.Workload, r.Mode, r)
		}
	}
	if floors != 2*3*3 {
		t.Errorf("%d runs of the Redis floors, want 18", floors)
	}
	picks, _ := report.Picks(f, Modes())
	for _, p := range picks {
		if strings.Contains(p.Limiter, "floor") || strings.Contains(p.Why, "(redis") && strings.Contains(p.Why, "floor)") {
			t.Errorf("a pick names a floor: %+v", p)
		}
	}
	prefix := f.Meta.Setting("redis-prefix")
	for _, match := range []string{prefix + "*", peers.RedisRatePrefix + prefix + "*"} {
		if keys, _, err := rdb.Scan(context.Background(), 0, match, 1_000_000).Result(); err != nil || len(keys) > 0 {
			t.Errorf("%d keys left under %s (%v)", len(keys), match, err)
		}
	}
}

// With no server at the URL, the lab runs the rest and says, once, why
// the Redis rows were not run.
func TestLabRedisUnreachable(t *testing.T) {
	addr := closedPort(t)
	c := smallLab()
	c.Redis.URL = "redis://" + addr + "/0"
	c.Limiters = []string{"gcra", redisName(limiters.GCRA), redisRateName}
	c.Workloads = []string{"uniform", "bursty"}
	c.Modes = []string{simulatedModeName, memoryModeName}
	f, err := Lab(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Meta.Setting("redis-addr") != "" || slices.Contains(strings.Split(f.Meta.Setting("limiters"), ","), redisRateName) {
		t.Errorf("the settings say Redis ran: %v", f.Meta.Settings)
	}
	ran := 0
	for _, r := range f.Rows {
		if r.Limiter == "gcra" && r.Skipped == "" {
			ran++
		}
	}
	if ran != 3 {
		t.Errorf("gcra ran %d times, want on each workload and in memory", ran)
	}
	want := redisName(limiters.GCRA) + ", redis_rate on uniform, bursty: no Redis at " + addr + ": connect: connection refused; point the lab at a server with --redis-url"
	if got := report.Skipped(f); len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("Skipped = %q, want one line starting %q", got, want)
	}
}

// Deciding each key's requests on a goroutine of its own gives the
// decisions of one goroutine deciding them all in order.
func TestSimulateByKey(t *testing.T) {
	c := smallLab().Defaults()
	w, err := c.Workload("uniform")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range limiters.Algorithms() {
		var got [2][]bool
		for i, workers := range []int{1, 7} {
			l, stop, err := newInMemory(a, c.Limit)
			if err != nil {
				t.Fatal(err)
			}
			if workers == 1 {
				got[i] = simulate(w, l)
			} else {
				got[i] = simulateByKey(w, l, workers)
			}
			stop()
		}
		if !slices.Equal(got[0], got[1]) {
			t.Errorf("%s: simulateByKey decided otherwise than Simulate", a)
		}
	}
}

func TestRedisConfigRefused(t *testing.T) {
	c := smallLab()
	c.Limiters = []string{redisName(limiters.GCRA)}
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "no Redis server") {
		t.Errorf("a Redis subject without a server: %v", err)
	}
	c.Redis.URL = "http://nowhere"
	if err := c.Defaults().Validate(); err == nil || !strings.Contains(err.Error(), "Redis URL") {
		t.Errorf("a bad URL: %v", err)
	}
}
