package results

import (
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/limiters"
)

// readV3 reads a file of version 3, whose run parameters were a record of
// their own (params), as this version: its parameters become the settings
// the flags that set them now record, so that a baseline of version 3 is
// compared with a run of this version.
func readV3(data []byte) (*File, error) {
	var old struct {
		Schema int `json:"schema"`
		Meta   struct {
			Meta
			Params v3Params `json:"params"`
		} `json:"meta"`
		Rows []Row `json:"rows"`
	}
	if err := Decode(data, &old); err != nil {
		return nil, err
	}
	f := &File{Schema: Schema, Meta: old.Meta.Meta, Rows: old.Rows}
	f.Meta.Settings = old.Meta.Params.settings()
	return f, nil
}

// v3Params are a version 3 file's parameters.
type v3Params struct {
	Quick                 bool     `json:"quick"`
	Limit                 int      `json:"limit"`
	Window                Seconds  `json:"window_s"`
	Limiters              []string `json:"limiters"`
	Workloads             []string `json:"workloads"`
	Modes                 []string `json:"modes"`
	Users                 int      `json:"users"`
	Attackers             int      `json:"attackers"`
	ManyUsers             int      `json:"many_users"`
	Simulated             Seconds  `json:"simulated_s"`
	Goroutines            []int    `json:"goroutines"`
	RealTime              Seconds  `json:"realtime_s"`
	LatencyGoroutines     int      `json:"latency_goroutines"`
	OfferedRate           float64  `json:"offered_rate_per_s"`
	LatencyRuns           int      `json:"latency_runs,omitempty"`
	RealTimeAccuracyScale float64  `json:"realtime_accuracy_scale"`
	TimingRounds          int      `json:"timing_rounds,omitempty"`
	TimingSample          Seconds  `json:"timing_sample_s,omitempty"`
	Redis                 *struct {
		Addr        string  `json:"addr"`
		Prefix      string  `json:"prefix"`
		Users       int     `json:"users"`
		Simulated   Seconds `json:"simulated_s"`
		RealTime    Seconds `json:"realtime_s"`
		LatencyTime Seconds `json:"latency_s"`
		OfferedRate float64 `json:"offered_rate_per_s"`
		Keys        int     `json:"keys"`
	} `json:"redis,omitempty"`
}

// settings are p as this version's settings, written as the flags write
// them.
func (p v3Params) settings() map[string]string {
	d := func(s Seconds) string { return s.Duration().String() }
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	ints := func(v []int) string {
		s := make([]string, len(v))
		for i, n := range v {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	}
	limit := limiters.Limit{N: p.Limit, Per: p.Window.Duration()}.String()
	s := map[string]string{
		"quick": strconv.FormatBool(p.Quick), "limit": limit, "limiters": strings.Join(p.Limiters, ","),
		"workloads": strings.Join(p.Workloads, ","), "modes": strings.Join(p.Modes, ","),
		"users": strconv.Itoa(p.Users), "attackers": strconv.Itoa(p.Attackers), "many-users": strconv.Itoa(p.ManyUsers),
		"simulated": d(p.Simulated), "realtime-accuracy-scale": f(p.RealTimeAccuracyScale),
	}
	if p.RealTime > 0 {
		s["goroutines"], s["realtime"] = ints(p.Goroutines), d(p.RealTime)
		s["latency-goroutines"], s["rate"], s["latency-runs"] = strconv.Itoa(p.LatencyGoroutines), f(p.OfferedRate), strconv.Itoa(p.LatencyRuns)
	}
	if p.TimingRounds > 0 {
		s["timing-rounds"], s["timing-sample"] = strconv.Itoa(p.TimingRounds), d(p.TimingSample)
	}
	if r := p.Redis; r != nil {
		s["redis-addr"], s["redis-prefix"], s["redis-users"], s["redis-simulated"] = r.Addr, r.Prefix, strconv.Itoa(r.Users), d(r.Simulated)
		s["redis-realtime"], s["redis-latency-time"], s["redis-rate"], s["redis-keys"] = d(r.RealTime), d(r.LatencyTime), f(r.OfferedRate), strconv.Itoa(r.Keys)
	}
	return s
}
