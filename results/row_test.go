package results_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ratelab/ratelab/results"
)

func TestRowSettings(t *testing.T) {
	var r results.Row
	if got := r.Setting("none"); got != "" || r.SettingInt("none") != 0 || r.SettingFloat("none") != 0 || r.SettingDuration("none") != 0 {
		t.Errorf("a row with no settings: %q, %d, %v, %v; want the zero values", got, r.SettingInt("none"), r.SettingFloat("none"), r.SettingDuration("none"))
	}
	r.Set("charge", "estimate only")
	r.SetInt(results.Goroutines, 8)
	r.SetFloat(results.Offered, 200_000)
	r.SetFloat("spread", 0.25)
	r.Set(results.JudgedPer, (1500 * time.Millisecond).String())
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"Setting", r.Setting("charge"), "estimate only"},
		{"SettingInt", r.SettingInt(results.Goroutines), 8},
		{"SetInt's text", r.Setting(results.Goroutines), "8"},
		{"SettingFloat", r.SettingFloat(results.Offered), 200_000.0},
		{"SetFloat's text", r.Setting(results.Offered), "200000"},
		{"SettingFloat of a fraction", r.SettingFloat("spread"), 0.25},
		{"SettingDuration", r.SettingDuration(results.JudgedPer), 1500 * time.Millisecond},
		{"SettingInt of text", r.SettingInt("charge"), 0},
		{"SettingDuration of text", r.SettingDuration("charge"), time.Duration(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	r.Set("charge", "max then settle")
	if got := r.Setting("charge"); got != "max then settle" || len(r.Config) != 5 {
		t.Errorf("Set again: %q and %d settings, want the value replaced among 5", got, len(r.Config))
	}
}

func TestRowMetrics(t *testing.T) {
	var r results.Row
	if v, ok := r.Value(results.Admitted); ok || v != 0 || r.Get(results.Admitted) != 0 || r.Has(results.Admitted) || r.Count(results.Admitted) != 0 {
		t.Errorf("a row with no metrics: Value = %v, %v; want 0, false", v, ok)
	}
	r.Add(results.Decisions, results.UnitCount, 1000)
	r.Add(results.AllocsPerDecision, results.UnitAllocs, 0)
	r.Add(results.Decisions, results.UnitCount, 1200) // replaces
	want := []results.Metric{{Name: results.Decisions, Unit: results.UnitCount, Value: 1200}, {Name: results.AllocsPerDecision, Unit: results.UnitAllocs, Value: 0}}
	if !slices.Equal(r.Metrics, want) {
		t.Errorf("Metrics = %+v, want %+v", r.Metrics, want)
	}
	if v, ok := r.Value(results.AllocsPerDecision); !ok || v != 0 || !r.Has(results.AllocsPerDecision) {
		t.Errorf("a metric of 0: Value = %v, %v; want 0, true (measured, and nothing)", v, ok)
	}
	if r.Get(results.Decisions) != 1200 || r.Count(results.Decisions) != 1200 {
		t.Errorf("Get = %v, Count = %v, want 1200", r.Get(results.Decisions), r.Count(results.Decisions))
	}
}

func TestRowSeries(t *testing.T) {
	var r results.Row
	if r.Curve(results.Throughput) != nil {
		t.Error("Curve of a row with no series is not nil")
	}
	r.AddSeries(results.Series{Name: results.Throughput, Unit: results.UnitPerS, Y: []float64{1, 2}})
	r.AddSeries(results.Series{Name: "latency_curve", Unit: results.UnitNS, XUnit: "quantile", X: []float64{0.5}, Y: []float64{40}})
	r.AddSeries(results.Series{Name: results.Throughput, Unit: results.UnitPerS, Y: []float64{3}}) // replaces
	if len(r.Series) != 2 || !slices.Equal(r.Curve(results.Throughput).Y, []float64{3}) || r.Curve("latency_curve").X[0] != 0.5 {
		t.Errorf("Series = %+v, want the throughput replaced and the curve kept", r.Series)
	}
	r.Curve(results.Throughput).Y[0] = 4
	if r.Series[0].Y[0] != 4 {
		t.Error("Curve returns a copy, not the row's series")
	}
}

func TestRowKinds(t *testing.T) {
	var r results.Row
	if r.IsFloor() || r.Outside() || !r.Measured() {
		t.Errorf("the zero row: floor %v, outside %v, measured %v; want false, false, true", r.IsFloor(), r.Outside(), r.Measured())
	}
	r.Set(results.Floor, "true")
	r.Backend = results.BackendRedis
	r.Skipped = "no Redis"
	if !r.IsFloor() || !r.Outside() || r.Measured() {
		t.Errorf("a skipped floor in Redis: floor %v, outside %v, measured %v; want true, true, false", r.IsFloor(), r.Outside(), r.Measured())
	}
	if (results.Row{Backend: results.BackendMemory}).Outside() {
		t.Error("a row in memory is outside")
	}
}

func TestRowAccuracy(t *testing.T) {
	var r results.Row
	if a, ok := r.AccuracyOf(); ok || a != (results.Accuracy{}) {
		t.Errorf("AccuracyOf a row with none = %+v, %v; want none", a, ok)
	}
	r.Add(results.Admitted, results.UnitCount, 5) // an admitted count alone is not an accuracy
	if _, ok := r.AccuracyOf(); ok {
		t.Error("AccuracyOf a row with no most in any W: true, want false")
	}
	a := results.Accuracy{Admitted: 300_000, Ideal: 295_000, FalseAllow: 295_000, FalseDeny: 290_000, FalseAllowRate: 0.5, FalseDenyRate: 0.4915, MaxWindowRatio: 2}
	r.SetAccuracy(a)
	if got, ok := r.AccuracyOf(); !ok || got != a {
		t.Errorf("AccuracyOf = %+v, %v; want %+v", got, ok, a)
	}
	if got := r.Wrong(); math.Abs(got-0.9915) > 1e-12 {
		t.Errorf("Wrong = %v, want 0.9915", got)
	}
	if r.Get(results.MostInWindow) != 2 || r.Count(results.FalseDenies) != 290_000 {
		t.Errorf("the metrics SetAccuracy records: %+v", r.Metrics)
	}
}

func TestRowLatency(t *testing.T) {
	var r results.Row
	q := results.Quantiles{P50: 136, P90: 154, P99: 994, P999: 28_224, Max: 219_966}
	r.SetLatency(results.Latency, q)
	r.SetLatency("during."+results.Latency, results.Quantiles{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5})
	if got, ok := r.LatencyOf(results.Latency); !ok || got != q {
		t.Errorf("LatencyOf = %+v, %v; want %+v", got, ok, q)
	}
	if r.Get(results.Latency+".p999") != 28_224 || r.Get(results.Latency+".max") != 219_966 {
		t.Errorf("the metrics SetLatency records: %+v", r.Metrics)
	}
	if _, ok := r.LatencyOf("before." + results.Latency); ok {
		t.Error("LatencyOf a prefix with none: true, want false")
	}
	drop(&r, results.Latency+".p999")
	if got, ok := r.LatencyOf(results.Latency); ok {
		t.Errorf("LatencyOf with a quantile missing = %+v, true; want false", got)
	}
}

func TestMedianQuantiles(t *testing.T) {
	for _, tt := range []struct {
		in   []results.Quantiles
		want results.Quantiles
	}{
		{nil, results.Quantiles{}},
		{[]results.Quantiles{{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5}}, results.Quantiles{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5}},
		// Quantile by quantile: no one run's.
		{[]results.Quantiles{{P50: 131, P90: 150, P99: 994, P999: 28_224, Max: 219_966}, {P50: 136, P90: 154, P99: 802, P999: 19_000, Max: 90_120},
			{P50: 140, P90: 161, P99: 2_480, P999: 31_000, Max: 1_200_000}},
			results.Quantiles{P50: 136, P90: 154, P99: 994, P999: 28_224, Max: 219_966}},
		{[]results.Quantiles{{P50: 1, P99: 10}, {P50: 3, P99: 20}}, results.Quantiles{P50: 2, P99: 15}},
	} {
		if got := results.MedianQuantiles(tt.in); got != tt.want {
			t.Errorf("MedianQuantiles(%+v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	in := []results.Quantiles{{P50: 3}, {P50: 1}, {P50: 2}}
	results.MedianQuantiles(in)
	if in[0].P50 != 3 {
		t.Error("MedianQuantiles reordered its input")
	}
}

// CostOf divides each round's figure by the mean of the floor's around
// it, and takes the median over the rounds that measured all three.
func TestCostOf(t *testing.T) {
	r := timing(results.Row{}, 0,
		[]results.Sample{{ThroughputPerS: 1e7, P50NS: 100, P90NS: 200}, {ThroughputPerS: 2e7, P50NS: 50, P90NS: 60}, {ThroughputPerS: 0, P50NS: 1, P90NS: 1}, {ThroughputPerS: 1e7, P50NS: 0, P90NS: 300}},
		[]results.Sample{{ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}, {ThroughputPerS: 3e8, P50NS: 5, P90NS: 10}, {ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}, {ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}},
		[]results.Sample{{ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}, {ThroughputPerS: 1e8, P50NS: 15, P90NS: 10}, {ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}, {ThroughputPerS: 1e8, P50NS: 10, P90NS: 20}})
	c, ok := results.CostOf(r)
	// Rounds 0, 1 and 3; round 2's limiter measured nothing, and round 3's
	// p50 is left out of the p50's median.
	// time/decision: 1e-7/1e-8 = 10; 5e-8/((1/3e8+1e-8)/2) = 7.5; 10.
	// p50: 100/10 = 10; 50/10 = 5. p90: 200/20 = 10; 60/10 = 6; 300/20 = 15.
	want := results.Cost{Throughput: 10, P50: 7.5, P90: 10, Rounds: 3}
	if !ok || math.Abs(c.Throughput-want.Throughput) > 1e-9 || c.P50 != want.P50 || c.P90 != want.P90 || c.Rounds != want.Rounds {
		t.Errorf("CostOf = %+v, %v; want %+v", c, ok, want)
	}
	for name, r := range map[string]results.Row{
		"no series":   {},
		"no floor":    timing(results.Row{}, 0, []results.Sample{{ThroughputPerS: 1e7, P50NS: 1, P90NS: 1}}, nil, nil),
		"no measured": timing(results.Row{}, 0, []results.Sample{{}}, []results.Sample{{ThroughputPerS: 1e8}}, []results.Sample{{ThroughputPerS: 1e8}}),
	} {
		if c, ok := results.CostOf(r); ok {
			t.Errorf("CostOf a row with %s = %+v, true; want false", name, c)
		}
	}
}
