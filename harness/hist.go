package harness

import (
	"math"
	"math/bits"

	"github.com/ratelab/ratelab/results"
)

// hist is a latency histogram in the manner of HDR Histogram: values below
// 256ns are counted exactly, larger ones in 128 buckets per power of two,
// so a recorded value is off by less than 0.8%. Max is kept exactly. It is
// not safe for concurrent use: each sender keeps its own, and they are
// merged after.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
}

const (
	histExact   = 256
	histSub     = 128
	histBuckets = histExact + 56*histSub // up to 2^63 ns
)

func histIndex(v int64) int {
	if v < histExact {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 8 // v >> e is in [128, 256)
	return histExact + (e-1)*histSub + int(uint64(v)>>e) - histSub
}

// histValue is the middle of bucket i.
func histValue(i int) float64 {
	if i < histExact {
		return float64(i)
	}
	e := (i-histExact)/histSub + 1
	sub := (i-histExact)%histSub + histSub
	lo := float64(uint64(sub) << e)
	return lo + float64(uint64(1)<<e)/2
}

func (h *hist) record(v int64) {
	h.counts[histIndex(v)]++
	h.n++
	h.max = max(h.max, v)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the value at quantile q in [0, 1].
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	seen := uint64(0)
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(histValue(i), float64(h.max))
		}
	}
	return float64(h.max)
}

// curveQuantiles are the quantiles a latency curve is kept at: from the
// median to four nines.
var curveQuantiles = []float64{0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999}

// curve is h at curveQuantiles: the series "latency_curve", X the
// quantile.
func (h *hist) curve() results.Series {
	s := results.Series{Name: latencyCurve, Unit: results.UnitNS, XUnit: "quantile", X: curveQuantiles, Y: make([]float64, len(curveQuantiles))}
	for i, q := range curveQuantiles {
		s.Y[i] = h.quantile(q)
	}
	return s
}

// latencyCurve names the series of a latency at many quantiles, for
// plotting.
const latencyCurve = "latency_curve"

func (h *hist) latency() results.Quantiles {
	return results.Quantiles{
		P50:  h.quantile(0.50),
		P90:  h.quantile(0.90),
		P99:  h.quantile(0.99),
		P999: h.quantile(0.999),
		Max:  float64(h.max),
	}
}
