package redislimit_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if, once every test has run, a goroutine of
// go-redis's or of a limiter is still running five seconds on: a client,
// a Ring or a batching Limiter some test did not close. Left running, such
// a goroutine fails a later test's own count (noneLeft) by chance, when
// the test that leaked it is long gone; here it is named with its stack.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if left := lingering(5 * time.Second); left != "" {
			fmt.Fprintf(os.Stderr, "FAIL: goroutines left running after every test ended (a client, Ring or Limiter not closed):\n%s", left)
			code = 1
		}
	}
	os.Exit(code)
}

// lingering waits up to wait for the goroutines running go-redis's or
// this module's code to end, and returns the stacks of those that did not.
func lingering(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "TestMain") {
				continue
			}
			if strings.Contains(g, "github.com/redis/go-redis/") || strings.Contains(g, "github.com/ratelab/ratelab/limiters") {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
