package main

import (
	"fmt"
	"syscall"

	"github.com/ratelab/ratelab/results"
)

// peakRSS is ", at most N MB in memory": the most this process has held
// resident so far, as the kernel counts it (ru_maxrss, in kilobytes).
func peakRSS() string {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil || ru.Maxrss <= 0 {
		return ""
	}
	return fmt.Sprintf(", at most %s MB in memory", results.Count(ru.Maxrss/1024))
}
