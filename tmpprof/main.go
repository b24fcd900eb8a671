package main

import (
	"context"
	"os"
	"runtime/pprof"
	"time"
	"fmt"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/plan"
	"github.com/ratelab/ratelab/workloads/accesslog"
)

func main() {
	f, _ := os.Open(os.Args[1])
	r, _ := accesslog.NewReader([]accesslog.Input{{Name: "x", R: f}}, accesslog.Options{})
	var lim []limiters.Limit
	for _, n := range []int{1, 2, 3, 5, 8, 13, 22, 36, 60, 100} {
		lim = append(lim, limiters.PerSecond(n))
	}
	pf, _ := os.Create("/tmp/plan.prof")
	pprof.StartCPUProfile(pf)
	t := time.Now()
	_, err := plan.Run(context.Background(), r, plan.Config{Limits: lim, Spare: 0.001}, nil)
	pprof.StopCPUProfile()
	fmt.Println(time.Since(t), err)
}
