package plots

import (
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/draw"

	"github.com/ratelab/ratelab/results"
)

// A limiter kept in Redis is drawn in its algorithm's colour, dash and
// dot, apart from it in memory and from the peers; redis_rate is a peer.
func TestRedisLineStyles(t *testing.T) {
	f := fixture(t)
	f.Rows = append(f.Rows, results.Row{Limiter: "redis_rate", Library: "github.com/go-redis/redis_rate/v10 v10.0.1", Algorithm: "gcra", Backend: results.BackendRedis, Mode: "realtime"})
	peers := peersOf(f)
	style := func(name string) draw.LineStyle { return lineStyle(name, peers[name]) }
	mem, red, peer := style("gcra"), style("gcra (redis)"), style("x/time/rate")
	if red.Color != mem.Color || len(red.Dashes) != 4 || len(mem.Dashes) != 0 || slices.Equal(red.Dashes, peer.Dashes) {
		t.Errorf("gcra (redis) drawn %+v; gcra %+v, x/time/rate %+v", red, mem, peer)
	}
	if rr := style("redis_rate"); rr.Color != palette["redis_rate"] || !slices.Equal(rr.Dashes, peer.Dashes) {
		t.Errorf("redis_rate drawn %+v, want its colour, dashed as a peer", rr)
	}
	// Batched and packed: GCRA's colour, each dashed its own way.
	for _, name := range []string{"gcra (redis batched)", "gcra (redis packed)"} {
		s := style(name)
		if s.Color != mem.Color {
			t.Errorf("%s drawn in %v, want gcra's %v", name, s.Color, mem.Color)
		}
		for _, other := range []string{"gcra", "gcra (redis)", "x/time/rate", "gcra (redis batched)", "gcra (redis packed)"} {
			if other != name && slices.Equal(s.Dashes, style(other).Dashes) {
				t.Errorf("%s is dashed as %s is: %v", name, other, s.Dashes)
			}
		}
	}
}

// The memory chart sets the server's memory per key apart from the
// process's heap, and says so; the report names the server.
func TestRedisMemoryChart(t *testing.T) {
	f := fixture(t)
	for k, v := range map[string]string{"redis-addr": "127.0.0.1:6379/0", "redis-users": "6", "redis-simulated": "5s", "redis-realtime": "50ms",
		"redis-latency-time": "100ms", "redis-rate": "2000", "redis-keys": "10000"} {
		f.Meta.Settings[k] = v
	}
	r := results.Row{Limiter: "gcra (redis)", Library: "ratelab", Algorithm: "gcra", Backend: results.BackendRedis, Workload: "many-users", Mode: "memory"}
	r.Add("users", results.UnitCount, 10_000)
	r.Add(results.Decisions, results.UnitCount, 10_000)
	r.Add(results.BytesPerUser, results.UnitBytes, 190)
	f.Rows = append(f.Rows, r)
	c := newChart(figure(t, f, "memory"), peersOf(f))
	if !strings.Contains(c.Title, "Redis's memory per key") || !strings.Contains(c.Caption, "not the process's heap") || c.legend.n != 3 {
		t.Errorf("memory chart: %q, %q, %d legend entries", c.Title, c.Caption, c.legend.n)
	}
	if _, err := c.render("png"); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(metaRows(f), func(r [2]string) bool { return r[0] == "Redis" && strings.Contains(r[1], "127.0.0.1:6379/0") }) {
		t.Errorf("the report's parameters do not name the Redis server: %v", metaRows(f))
	}
}
