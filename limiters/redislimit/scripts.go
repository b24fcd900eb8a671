package redislimit

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"

	"github.com/ratelab/ratelab/limiters"
)

//go:embed lua/*.lua
var lua embed.FS

// script is a Lua script's source and its SHA-1, the name EVALSHA runs it
// by.
type script struct {
	src, sha string
	arg      any // sha, boxed once: a string boxed at each call allocates
}

// scripts are what a Limiter runs: a decision alone (one), a batch of
// them (many), and a settle.
type scripts struct {
	one, many, settle *script
}

// The scripts by role. Every algorithm's is the prelude, the helpers, the
// window arithmetic if the algorithm counts in windows, the algorithm's
// load/admits/charge/describe/settle, the driver, then one.lua, many.lua
// or settle.lua. (A script defines only the functions it uses: Lua 5.1
// builds every function anew on each run.) GCRA with one limit decides
// with a script of its own (gcrasingle.lua), written out for speed, and
// its packed keys (WithPacking) with gcrapacked.lua and
// gcrapackedsettle.lua, which have no batch script.
var (
	general  = map[limiters.Algorithm]scripts{}
	gcraOne  scripts
	gcraPack scripts
	prelude  string // every script's start
	helpers  string // the time and key functions of the general decide
	windows  string // the window arithmetic
)

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
		body := prelude + helpers + src + driver
		general[a] = scripts{one: newScript(body + one), many: newScript(body + many), settle: newScript(body + settle)}
	}
	single, tat := read("gcrasingle"), read("gcratat")
	gcraOne = scripts{one: newScript(prelude + single + one), many: newScript(prelude + single + many), settle: general[limiters.GCRA].settle}
	gcraPack = scripts{one: newScript(prelude + tat + read("gcrapacked") + one), settle: newScript(prelude + tat + read("gcrapackedsettle"))}
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	return &script{src: src, sha: sha, arg: sha}
}
