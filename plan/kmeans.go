package plan

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// clustering is k-means' answer: each point's group, and the sum of the
// squared distances to the groups' centres.
type clustering struct {
	k       int
	of      []int
	sse     float64
	centres [][]float64
}

// kmeansSample is how many points k-means is fitted on, at most: of more,
// a sample of every n-th, each point then of its nearest centre (the
// shop's 22,373 keys fitted whole took 1.6 s of CPU a plan).
const kmeansSample = 4000

// kmeansAll is kmeans(points, k) fitted on a sample of at most
// kmeansSample of them (every n-th), every point then given the nearest
// of its centres, and the sum of squared distances of all of them.
func kmeansAll(points [][]float64, k int) clustering {
	if len(points) <= kmeansSample {
		return kmeans(points, k)
	}
	stride := (len(points) + kmeansSample - 1) / kmeansSample
	var sample [][]float64
	for i := 0; i < len(points); i += stride {
		sample = append(sample, points[i])
	}
	fit := kmeans(sample, k)
	c := clustering{k: fit.k, of: make([]int, len(points)), centres: fit.centres}
	for i, p := range points {
		best, d := 0, math.Inf(1)
		for j, centre := range fit.centres {
			if x := sqDist(p, centre); x < d {
				best, d = j, x
			}
		}
		c.of[i], c.sse = best, c.sse+d
	}
	return c
}

func sqDist(a, b []float64) float64 {
	var d float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
	}
	return d
}

// kmeans groups points into k: of five tries, each its first centres
// spread by k-means++ from a seed of its own (fixed: the same log gives
// the same classes), the one that leaves the least unexplained (the
// first of those). The tries run at once, each on a core (the shop's
// 22,373 keys: 1.4 s of a plan on one).
func kmeans(points [][]float64, k int) clustering {
	var tries [5]clustering
	var wg sync.WaitGroup
	for try := range uint64(len(tries)) {
		wg.Go(func() { tries[try] = kmeansFrom(points, k, rand.New(rand.NewPCG(try+1, uint64(k)))) })
	}
	wg.Wait()
	best := tries[0]
	for _, c := range tries[1:] {
		if c.sse < best.sse {
			best = c
		}
	}
	return best
}

// kmeansFrom is one try of kmeans, its first centres drawn with rng.
func kmeansFrom(points [][]float64, k int, rng *rand.Rand) clustering {
	dist := sqDist
	centres := [][]float64{slices.Clone(points[rng.IntN(len(points))])}
	near := make([]float64, len(points))
	for len(centres) < k {
		var sum float64
		for i, p := range points {
			near[i] = math.Inf(1)
			for _, c := range centres {
				near[i] = min(near[i], dist(p, c))
			}
			sum += near[i]
		}
		if sum == 0 {
			break // fewer distinct points than k
		}
		x := rng.Float64() * sum
		i := 0
		for ; i < len(points)-1 && x >= near[i]; i++ {
			x -= near[i]
		}
		centres = append(centres, slices.Clone(points[i]))
	}
	c := clustering{k: len(centres), of: make([]int, len(points))}
	for range 50 {
		moved := false
		for i, p := range points {
			best := 0
			for j := range centres {
				if dist(p, centres[j]) < dist(p, centres[best]) {
					best = j
				}
			}
			moved = moved || best != c.of[i]
			c.of[i] = best
		}
		counts := make([]int, len(centres))
		for j := range centres {
			clear(centres[j])
		}
		for i, p := range points {
			counts[c.of[i]]++
			for d := range p {
				centres[c.of[i]][d] += p[d]
			}
		}
		for j := range centres {
			for d := range centres[j] {
				centres[j][d] /= float64(max(counts[j], 1))
			}
		}
		if !moved {
			break
		}
	}
	for i, p := range points {
		c.sse += dist(p, centres[c.of[i]])
	}
	c.centres = centres
	return c
}
