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

// scripts holds every algorithm's script: the prelude, the algorithm's
// load/admits/charge/describe, then the driver.
var scripts = map[limiters.Algorithm]*script{}

// prelude is the part every script starts with.
var prelude string

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
	for a, file := range map[limiters.Algorithm]string{
		limiters.FixedWindow:    "fixedwindow",
		limiters.SlidingLog:     "slidinglog",
		limiters.SlidingCounter: "slidingcounter",
		limiters.TokenBucket:    "tokenbucket",
		limiters.LeakyBucket:    "leakybucket",
		limiters.GCRA:           "gcra",
	} {
		scripts[a] = newScript(prelude + read(file) + driver)
	}
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}
