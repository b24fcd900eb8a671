package results

import (
	"slices"
	"strconv"
	"time"
)

// Row is one measurement of the lab: one limiter, in one mode, on one
// workload (none for a mode that measures once), under one configuration.
// In the spirit of Go's benchmark format: what was measured is said by
// key/value settings, what came out by metrics, each a name, a unit and a
// value, so that a new mode adds rows, not fields. Curves and samples a
// table summarizes (a latency curve, a timing run's rounds) are Series.
//
// A row's identity is its mode, workload, limiter and settings: a file
// holds each once.
type Row struct {
	Mode     string `json:"mode"`
	Workload string `json:"workload,omitempty"`
	// Limiter names the implementation: a ratelab algorithm ("gcra") or
	// a peer library ("x/time/rate"); Library is the Go module and
	// version measured; Backend where it keeps its state.
	Limiter   string `json:"limiter"`
	Library   string `json:"library,omitempty"`
	Algorithm string `json:"algorithm,omitempty"`
	Backend   string `json:"backend,omitempty"`
	// Config are the settings this row was measured under, beyond the
	// file's parameters: goroutines, an offered rate, a way of charging.
	Config  map[string]string `json:"config,omitempty"`
	Metrics []Metric          `json:"metrics,omitempty"`
	Series  []Series          `json:"series,omitempty"`
	// Skipped says why the measurement did not happen.
	Skipped string `json:"skipped,omitempty"`
	// Note says how a row differs from the others of its table (a
	// limiter kept in Redis runs on a sample of the workload, say); the
	// tables print each note once.
	Note string `json:"note,omitempty"`
}

// Metric is one number a row measured.
type Metric struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// Series is a curve (Y at each X) or a list of samples (Y alone, X
// empty) a row measured.
type Series struct {
	Name  string    `json:"name"`
	Unit  string    `json:"unit"`
	XUnit string    `json:"x_unit,omitempty"`
	X     []float64 `json:"x,omitempty"`
	Y     []float64 `json:"y"`
}

// The units of metrics and series.
const (
	UnitCount    = "count"
	UnitNS       = "ns"
	UnitPerS     = "1/s"
	UnitFraction = "fraction"
	UnitRatio    = "ratio"
	UnitBytes    = "B"
	UnitSeconds  = "s"
	UnitTokens   = "tokens"
	UnitAllocs   = "allocs"
)

// The metrics more than one mode measures, and the tables, the scorecard
// and the gate read whatever the mode.
const (
	// Decisions is how many decisions a row made.
	Decisions = "decisions"
	// Admitted is how many requests the limiter admitted, IdealAdmitted
	// how many the ideal (the sliding window log, exact, on the same
	// arrivals) did. FalseAllows counts requests the limiter admitted
	// and the ideal denied, FalseDenies the other way round; the rates
	// are per request.
	Admitted       = "admitted"
	IdealAdmitted  = "ideal_admitted"
	FalseAllows    = "false_allows"
	FalseDenies    = "false_denies"
	FalseAllowRate = "false_allow_rate"
	FalseDenyRate  = "false_deny_rate"
	// MostInWindow is the most cost one key had admitted in any interval
	// of length W, divided by N: 1 for an exact limiter, up to 2 for a
	// fixed window.
	MostInWindow = "most_in_window"
	// AllocsPerDecision is the heap allocations per decision in steady
	// state: over a further pass of the workload, after the first made
	// the keys (the fewest of three such passes).
	AllocsPerDecision = "allocs_per_decision"
	// DiffersFromMemory is, for a limiter kept outside the process, how
	// many of its decisions differed from those of the same algorithm in
	// memory on the same requests: 0 when the backend is exact.
	DiffersFromMemory = "differs_from_memory"
	// Throughput is decisions a second.
	Throughput = "throughput"
	// BytesPerUser is the live heap per key held.
	BytesPerUser = "bytes_per_user"
	// Latency prefixes the quantiles of a decision's latency
	// (LatencyOf names them).
	Latency = "latency"
	// TimeScale is how much time was compressed when accuracy was
	// measured on the real clock.
	TimeScale = "time_scale"
)

// The settings more than one mode uses.
const (
	// Goroutines is how many goroutines sent the requests; Offered, at
	// what total rate a second (none: as fast as each could go).
	Goroutines = "goroutines"
	Offered    = "offered_per_s"
	// JudgedN and JudgedPer are the limit N per W a row's accuracy is
	// judged against: for a bucket, its capacity C over C/R.
	JudgedN   = "judged_n"
	JudgedPer = "judged_per"
	// Floor, "true", says the limiter decided nothing and admitted
	// everything: what the harness, or a round trip to Redis, costs
	// alone.
	Floor = "floor"
	// OwnLimits says the limiter had limits of its own (a
	// configuration's tiers), not the lab's N per W: its costs compare
	// with the others', its decisions do not, and the picks leave it out.
	OwnLimits = "own_limits"
)

// BackendRedis is the backend of a limiter kept in a Redis server;
// BackendMemory that of one in the process. LibraryRatelab is ratelab's
// own library; any other is a peer.
const (
	BackendRedis   = "redis"
	BackendMemory  = "memory"
	LibraryRatelab = "ratelab"
)

// Set sets a setting.
func (r *Row) Set(key, value string) {
	if r.Config == nil {
		r.Config = map[string]string{}
	}
	r.Config[key] = value
}

// SetInt sets a setting to an integer.
func (r *Row) SetInt(key string, v int) { r.Set(key, strconv.Itoa(v)) }

// SetFloat sets a setting to a number.
func (r *Row) SetFloat(key string, v float64) { r.Set(key, strconv.FormatFloat(v, 'g', -1, 64)) }

// Setting returns a setting, "" if r has none by that key.
func (r Row) Setting(key string) string { return r.Config[key] }

// SettingInt returns a setting as an integer, 0 if r has none.
func (r Row) SettingInt(key string) int {
	n, _ := strconv.Atoi(r.Config[key])
	return n
}

// SettingFloat returns a setting as a number, 0 if r has none.
func (r Row) SettingFloat(key string) float64 {
	v, _ := strconv.ParseFloat(r.Config[key], 64)
	return v
}

// SettingDuration returns a setting written by a time.Duration's String,
// 0 if r has none.
func (r Row) SettingDuration(key string) time.Duration {
	d, _ := time.ParseDuration(r.Config[key])
	return d
}

// Add records a metric, replacing one of the same name.
func (r *Row) Add(name, unit string, v float64) {
	if i := slices.IndexFunc(r.Metrics, func(m Metric) bool { return m.Name == name }); i >= 0 {
		r.Metrics[i] = Metric{name, unit, v}
		return
	}
	r.Metrics = append(r.Metrics, Metric{name, unit, v})
}

// Value returns a metric, and whether r has it.
func (r Row) Value(name string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// Get returns a metric, 0 if r has none by that name.
func (r Row) Get(name string) float64 {
	v, _ := r.Value(name)
	return v
}

// Count returns a metric that counts, 0 if r has none by that name.
func (r Row) Count(name string) int64 { return int64(r.Get(name)) }

// Has reports whether r has a metric.
func (r Row) Has(name string) bool {
	_, ok := r.Value(name)
	return ok
}

// AddSeries records a series, replacing one of the same name.
func (r *Row) AddSeries(s Series) {
	if i := slices.IndexFunc(r.Series, func(x Series) bool { return x.Name == s.Name }); i >= 0 {
		r.Series[i] = s
		return
	}
	r.Series = append(r.Series, s)
}

// Curve returns a series, nil if r has none by that name.
func (r Row) Curve(name string) *Series {
	for i := range r.Series {
		if r.Series[i].Name == name {
			return &r.Series[i]
		}
	}
	return nil
}

// Outside reports whether r's limiter kept its state outside the process,
// in a Redis server: each decision a round trip, so the lab runs it on a
// sample, compare leaves it out (the server is not the tree's to regress,
// and may be absent), and the picks for one process do not weigh it
// against the limiters in memory.
func (r Row) Outside() bool { return r.Backend == BackendRedis }

// IsFloor reports whether r measured a floor, which decides nothing.
func (r Row) IsFloor() bool { return r.Config[Floor] == "true" }

// Measured reports whether the measurement happened.
func (r Row) Measured() bool { return r.Skipped == "" }

// Accuracy is what an accuracy measurement found, against the ideal;
// SetAccuracy records it in a row, AccuracyOf reads it back.
type Accuracy struct {
	Admitted, Ideal       int64
	FalseAllow, FalseDeny int64
	// The rates are per request.
	FalseAllowRate, FalseDenyRate float64
	MaxWindowRatio                float64
}

// SetAccuracy records a as r's metrics.
func (r *Row) SetAccuracy(a Accuracy) {
	r.Add(Admitted, UnitCount, float64(a.Admitted))
	r.Add(IdealAdmitted, UnitCount, float64(a.Ideal))
	r.Add(FalseAllows, UnitCount, float64(a.FalseAllow))
	r.Add(FalseDenies, UnitCount, float64(a.FalseDeny))
	r.Add(FalseAllowRate, UnitFraction, a.FalseAllowRate)
	r.Add(FalseDenyRate, UnitFraction, a.FalseDenyRate)
	r.Add(MostInWindow, UnitRatio, a.MaxWindowRatio)
}

// AccuracyOf returns r's accuracy, and whether it measured one.
func (r Row) AccuracyOf() (Accuracy, bool) {
	if !r.Has(MostInWindow) {
		return Accuracy{}, false
	}
	return Accuracy{
		Admitted: r.Count(Admitted), Ideal: r.Count(IdealAdmitted),
		FalseAllow: r.Count(FalseAllows), FalseDeny: r.Count(FalseDenies),
		FalseAllowRate: r.Get(FalseAllowRate), FalseDenyRate: r.Get(FalseDenyRate),
		MaxWindowRatio: r.Get(MostInWindow),
	}, true
}

// Wrong is the share of r's decisions that differed from the ideal's:
// false allows and false denies, per request.
func (r Row) Wrong() float64 { return r.Get(FalseAllowRate) + r.Get(FalseDenyRate) }

// Quantiles is the distribution of a latency, in nanoseconds.
type Quantiles struct {
	P50, P90, P99, P999, Max float64
}

// quantileNames name Quantiles' fields, after a prefix and a dot.
var quantileNames = [...]string{"p50", "p90", "p99", "p999", "max"}

func (q Quantiles) values() [5]float64 { return [5]float64{q.P50, q.P90, q.P99, q.P999, q.Max} }

// SetLatency records q as r's metrics prefix.p50, prefix.p90 and so on.
func (r *Row) SetLatency(prefix string, q Quantiles) {
	for i, v := range q.values() {
		r.Add(prefix+"."+quantileNames[i], UnitNS, v)
	}
}

// LatencyOf returns the quantiles SetLatency recorded under prefix, and
// whether r has them.
func (r Row) LatencyOf(prefix string) (Quantiles, bool) {
	var v [5]float64
	for i, n := range quantileNames {
		x, ok := r.Value(prefix + "." + n)
		if !ok {
			return Quantiles{}, false
		}
		v[i] = x
	}
	return Quantiles{v[0], v[1], v[2], v[3], v[4]}, true
}

// MedianQuantiles is the median of qs, quantile by quantile.
func MedianQuantiles(qs []Quantiles) Quantiles {
	var out [5]float64
	for i := range out {
		v := make([]float64, len(qs))
		for j, q := range qs {
			v[j] = q.values()[i]
		}
		out[i] = medianOf(v)
	}
	return Quantiles{out[0], out[1], out[2], out[3], out[4]}
}
