package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// A plan's memory: --memory, Go's soft limit, which the collector keeps
// the heap near (it lets the heap grow to twice what is live otherwise:
// a 100M-line log's plan on two cores peaked at 2.54 GB, 1.76 GB under
// GOMEMLIMIT=1600MiB).

// defaultMemory is the least of 1.5 GiB and half of this machine's
// memory (or of what its cgroup allows), 1.5 GiB where neither is read.
func defaultMemory() int64 {
	const most = 3 << 29 // 1.5 GiB
	if m := machineMemory(); m > 0 {
		return min(most, m/2)
	}
	return most
}

// machineMemory is what this machine holds, or what this process's cgroup
// allows if less; 0 where neither is read.
func machineMemory() int64 {
	var total int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					total = kb << 10
				}
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}

// parseBytes reads a size: 1.5GiB, 800MB, 2G, 512MiB, or bytes.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		scale  float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	scale := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, scale = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) || math.IsInf(v*scale, 0) || v*scale > math.MaxInt64/2 {
		return 0, fmt.Errorf("--memory %s: want a size, as 1.5GiB, 800MB or 2G", s)
	}
	return int64(v * scale), nil
}

// bytesWords is n bytes as a person reads them: "1.5 GiB", "800 MiB".
func bytesWords(n int64) string {
	if n >= 1<<30 {
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<30)), ".0") + " GiB"
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// setMemory sets Go's soft limit to the plan's --memory (flag, or the
// default), unless GOMEMLIMIT set one and --memory was not given. It
// returns the limit in force and a func that puts back the one before.
func setMemory(flag string) (int64, func(), error) {
	m := defaultMemory()
	if flag != "" {
		var err error
		if m, err = parseBytes(flag); err != nil {
			return 0, nil, err
		}
	} else if env := os.Getenv("GOMEMLIMIT"); env != "" && env != "off" {
		return debug.SetMemoryLimit(-1), func() {}, nil
	}
	before := debug.SetMemoryLimit(m)
	return m, func() { debug.SetMemoryLimit(before) }, nil
}
