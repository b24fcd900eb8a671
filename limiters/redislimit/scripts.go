package redislimit

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"

	"github.com/ratelab/ratelab/limiters"
)

//go:embed lua/*.lua
var lua embed.FS

// script is one algorithm's Lua source and its SHA-1, the name EVALSHA
// runs it by.
type script struct {
	src, sha string
}

// scripts holds every algorithm's script: the prelude, the window
// arithmetic if the algorithm counts in windows, the algorithm's
// load/admits/charge/describe, then the driver. (A script defines only the
// functions it uses: Lua 5.1 builds every function anew on each run.)
var scripts = map[limiters.Algorithm]*script{}

// prelude is the part every script starts with; windows, the window
// arithmetic.
var prelude, windows string

func init() {
	read := func(name string) string {
		b, err := lua.ReadFile("lua/" + name + ".lua")
		if err != nil {
			panic(err) // the files are embedded: only a broken build gets here
		}
		return string(b)
	}
	driver := read("driver")
	prelude = read("prelude")
	windows = read("windows")
	for a, src := range map[limiters.Algorithm]string{
		limiters.FixedWindow:    windows + read("fixedwindow"),
		limiters.SlidingLog:     read("slidinglog"),
		limiters.SlidingCounter: windows + read("slidingcounter"),
		limiters.TokenBucket:    read("tokenbucket"),
		limiters.LeakyBucket:    read("leakybucket"),
		limiters.GCRA:           read("gcra"),
	} {
		scripts[a] = newScript(prelude + src + driver)
	}
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}
