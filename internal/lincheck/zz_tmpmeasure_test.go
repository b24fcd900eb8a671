package lincheck

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ratelab/ratelab/limiters"
)

// Temporary: verdicts of the settle plant's seeds, not stopping.
func TestTmpSettleSeeds(t *testing.T) {
	timeout := 2 * time.Second
	if s := os.Getenv("TMP_TIMEOUT"); s != "" {
		d, _ := time.ParseDuration(s)
		timeout = d
	}
	n, _ := strconv.Atoi(os.Getenv("TMP_N"))
	if n == 0 {
		n = 60
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		w := workload(uint64(i))
		w.Settles, w.Calls = 3, 20
		inner, done := inMemory(t, limiters.GCRA)()
		start := time.Now()
		res, err := checkHistory(settledEarly{inner.(settler)}, newModel(inMemory(t, limiters.GCRA), nil), w, timeout)
		done()
		if err != nil {
			t.Fatal(err)
		}
		c := map[porcupine.CheckResult]string{porcupine.Ok: ".", porcupine.Illegal: "X", porcupine.Unknown: "?"}[res.Verdict]
		if res.Verdict == porcupine.Illegal && time.Since(start) > 200*time.Millisecond {
			c = "x" // illegal, slow
		}
		fmt.Fprint(&b, c)
	}
	t.Log(b.String())
}
