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

// scripts holds every algorithm's script: the prelude, the helpers, the
// window arithmetic if the algorithm counts in windows, the algorithm's
// load/admits/charge/describe, the driver, then one.lua. (A script
// defines only the functions it uses: Lua 5.1 builds every function anew
// on each run.)
var scripts = map[limiters.Algorithm]*script{}

// batches holds every algorithm's script for a batch of decisions, the
// same but for many.lua in place of one.lua.
var batches = map[limiters.Algorithm]*script{}

// single holds the scripts, for one decision and for a batch, of the
// algorithms whose decide is written out for one limit, where that is
// worth its upkeep (tested against the in-memory limiters like the rest).
var single = map[limiters.Algorithm][2]*script{}

// packed is GCRA's script for one decision on keys packed in hashes
// (WithPacking).
var packed *script

// settles holds every algorithm's script for a settle: the same parts as
// a decision's, then settle.lua.
var settles = map[limiters.Algorithm]*script{}

// prelude is the part every script starts with; helpers, the time and
// key functions of the general decide; windows, the window arithmetic.
var prelude, helpers, windows string

func init() {
	read := func(name string) string {
		b, err := lua.ReadFile("lua/" + name + ".lua")
		if err != nil {
			panic(err) // the files are embedded: only a broken build gets here
		}
		return string(b)
	}
	prelude, helpers, windows = read("prelude"), read("helpers"), read("windows")
	driver, one, many, settle := read("driver"), read("one"), read("many"), read("settle")
	for a, src := range map[limiters.Algorithm]string{
		limiters.FixedWindow:    windows + read("fixedwindow"),
		limiters.SlidingLog:     read("slidinglog"),
		limiters.SlidingCounter: windows + read("slidingcounter"),
		limiters.TokenBucket:    read("tokenbucket"),
		limiters.LeakyBucket:    read("leakybucket"),
		limiters.GCRA:           read("gcra"),
	} {
		scripts[a] = newScript(prelude + helpers + src + driver + one)
		batches[a] = newScript(prelude + helpers + src + driver + many)
		settles[a] = newScript(prelude + helpers + src + driver + settle)
	}
	gcra1 := read("gcra1")
	single[limiters.GCRA] = [2]*script{newScript(prelude + gcra1 + one), newScript(prelude + gcra1 + many)}
	packed = newScript(prelude + read("gcraone") + read("gcrapacked") + one)
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}
