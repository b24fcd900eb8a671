# ratelab's two jobs: `make test` (the tests CI runs) and `make bench` (the
# lab); and `make gate`, the regression gate CI runs after the tests
# (NO_BASE_OK=1 lets it pass without a base to time against; CI never sets it). All
# set up what they need: Go fetches the modules, and the pinned tools
# (staticcheck, benchstat) are built from tools/go.mod on first use.
#
# Two modules: the library (limiters/, its own go.mod: it requires go-redis
# and nothing else) and the lab and the command (the root), tied by
# go.work. A pattern covers one module: PKGS names both.

GO        ?= go
# -trimpath: the build cache's keys then leave out where the tree is, so
# that a fresh clone reuses what Go compiled for the same source anywhere
# else: make test from a fresh clone with a warm cache compiled every
# package of the project again (5:27 here, against 3:54 in place).
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(GOFLAGS)))
OUT       ?= out
PKGS      := ./... ./limiters/...
# The pinned tools, built from tools/go.mod (outside the workspace: a
# -modfile takes no go.work) into out/bin.
BIN       := $(OUT)/bin
STATICCHECK := $(BIN)/staticcheck
BENCHSTAT   := $(BIN)/benchstat
# envoycheck checks the Envoy configurations the plan writes against
# Envoy's protos (go-control-plane), a module of its own in tools/envoycheck.
ENVOYCHECK  := $(BIN)/envoycheck
# The committed figures the gate compares the quick lab with: accuracy,
# allocations and memory, which do not depend on the machine.
BASELINE  ?= results/baseline.json
# Benchmarks: samples per benchmark, and time per sample. Six samples is
# the least benchstat needs for a confidence interval worth reading.
COUNT     ?= 6
BENCHTIME ?= 200ms

.PHONY: all install readme-check test-steps test-clocked-steps bench-steps bench-quick-steps plan-steps readme-check-steps test fmt-check vet staticcheck race norace test-clocked install-check soak soak-serve flood memcheck gate baseline bench bench-quick plan bench-go bench-go-run bench-go-report clean

all: test

## test: gofmt, go vet, staticcheck and the tests but the clocked ones (make test-clocked), shuffled; under the race detector where a test starts goroutines (README.md's table says how long it takes)
# (Staticcheck beside the first phase of the tests saved nothing: from a
# fresh clone on an Intel Xeon host, 5:56 against 5:43 one after the other,
# staticcheck 55s and the tests 129s alone, 191s together.) The tests that
# judge a limiter by the clock are make test-clocked's, which CI runs too.
# The race-detected tests and the rest run side by side: each phase ends
# on one long package (plan under the detector, the probe's simulations
# without it) that leaves a core idle for a minute.
test-steps: fmt-check vet staticcheck
	@$(MAKE) --no-print-directory -j2 race norace

# The targets whose times README.md states: each runs through tools/timed,
# which appends how long it took, and its largest process's peak memory,
# to out/times.tsv; make readme-check compares them with the README.
TIMED_TARGETS := test test-clocked bench bench-quick plan readme-check
$(TIMED_TARGETS):
	@OUT='$(OUT)' tools/timed $@ $(MAKE) --no-print-directory $@-steps

fmt-check:
	@files=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './out/*')); \
	if [ -n "$$files" ]; then echo "gofmt would change:"; echo "$$files"; exit 1; fi

# vet and staticcheck read the packages as the race-detected build
# compiles them (-race, and the race build tag), so that the three share
# one compilation of every dependency: from a fresh clone that is 50 s of
# make test's time on two cores. The test run skips its own vet, a subset
# of go vet's, for the same reason.
vet:
	$(GO) vet -race $(PKGS)

staticcheck: $(STATICCHECK)
	GOFLAGS='$(GOFLAGS) -race' $(STATICCHECK) $(PKGS)

$(STATICCHECK): tools/go.mod tools/go.sum
	GOWORK=off $(GO) build -modfile=tools/go.mod -o $@ honnef.co/go/tools/cmd/staticcheck

$(ENVOYCHECK): tools/envoycheck/go.mod tools/envoycheck/go.sum tools/envoycheck/main.go
	cd tools/envoycheck && GOWORK=off $(GO) build -o $(abspath $@) .

$(BENCHSTAT): tools/go.mod tools/go.sum
	GOWORK=off $(GO) build -modfile=tools/go.mod -o $@ golang.org/x/perf/cmd/benchstat

# The tests get a real Redis server in REDIS_ADDR: the one it names, else
# one running on 127.0.0.1:6379, else one tools/with-redis starts (and
# installs, if need be) for the run and stops after. REDIS_REQUIRED makes
# a missing server a failure, not a skip (go test alone skips). Three
# test binaries run at once on two cores: the lab's, the gate's and the
# Redis fault tests spend much of their time waiting (for a server to come
# back, a breaker, a paced attack), and a third fills it: 143 s against
# 116 s here, warm. The Redis tests start first: their failovers wait the
# longest, and last they ran alone for 47 s of a 185 s run (174 s first).
#
# The race detector finds races between goroutines, and costs 3x to 20x
# the CPU (a report's charts: 9.2 s against 0.4 s; TestManyKeys: 36.5 s
# against 3.8 s, on the EPYC host). What starts no goroutine runs without
# it: the packages that start none (plots, results, workloads: no go
# statement, in the code or its tests) and the tests in NORACE, each of
# one goroutine (a limiter with no sweeper, decided in turn: the model
# checks, the many-keys memory check, the key table against a map, the
# probe's models against the limiters, its fit and its whole run against
# targets in simulated time, whose parallel subtests share nothing; the
# plan's rule on random worlds and the B2B API's log, from the curves);
# and TestDecisionAllocations, which the detector's sync.Pool would fail.
# Without the detector the model checks run their full 300 seeds, not 40.
NORACE_PKGS := ./plots ./results ./workloads
NORACE := ^(TestManyKeys|TestAgainstModel|FuzzAgainstModel|TestSettleAgainstModel|FuzzSettleAgainstModel|TestDenialsAgreeWithPeek|TestAgainstMap|TestDecisionAllocations|TestProbeSimulated|TestProbeSimulatedNone|TestProbeSimulatedFields|TestProbeSimulatedLongWindow|TestProbeSimulatedRefusal|TestProbeSimulatedMaxRate|TestProbeSimulatedLarge|TestProbeDeclaredTooLarge|TestProbeSimulatedPhase|TestProbeSimulatedStraddle|TestProbeSimulatedQueue|TestProbeSimulatedTwoLimits|TestProbeUndecided|TestFitFindsEachVariant|TestModelsAgree|TestPolicyOnRandomWorlds|TestB2B|TestPolicyWithoutSweep|TestStretchesMergeExactly|TestSummariesMergeAsOnePass|TestShardsMergeAsOnePass|TestMobileNeedsTwoNumbers)$$
# Every other package, the slowest first (go test runs them in this order).
RACE_FIRST = $(shell $(GO) list ./limiters/redislimit ./cmd/ratelab ./limiters/composite ./harness ./limiters)
RACE_PKGS = $(RACE_FIRST) $(filter-out $(RACE_FIRST) $(shell $(GO) list $(NORACE_PKGS)),$(shell $(GO) list $(PKGS)))

# The tests that judge a limiter by the clock over loopback (the probes,
# the outage run) are make test-clocked's: beside other test binaries on
# two cores their requests were in flight for 50ms and fits fell. The
# probe's tests of real limiters run three probes at once (probeSlots),
# each with no policy given: ratelab serve's twelve, nginx's four, npm's
# nine (Node.js, which tools/with-node installs if it is missing, like
# nginx with tools/with-nginx) and eleven planted; every fit must hold so,
# within its budget of time. After them, by itself (beside them, the
# planted ticker's fit fell), ./cmd/ratelab's closed loop probes the plan's
# emitted nginx, tier file, haproxy.cfg and Caddyfile (TestPlanEmittedLoop:
# nine probes at once, and a slice of the log sent to nginx, about a minute;
# Debian's haproxy from tools/with-haproxy, and a Caddy with the rate_limit
# plugin that tools/with-caddy builds once from tools/caddy into out/bin,
# which haproxy -c and caddy validate of what the products write need too).
# They run without the race detector, which
# makes the fits between rounds five to ten times slower and the budgets
# meaningless; the probe's sender, where its goroutines are, runs under it
# in the probes of TIMED_RACE, with the lab's outage run and the command's
# probe.
TIMED_PROBE := ^(TestProbeServe|TestProbeServeLarge|TestProbeNginx|TestProbeNode|TestProbePlanted|TestProbeTwoLimits)$$
TIMED_LOOP := ^TestPlanEmittedLoop$$
TIMED_RACE := ^(TestProbeBySource|TestProbeCatchesLostUpdates|TestProbeStopped|TestProbeExpect|TestLabOutage)$$
TIMED := ^(TestProbeServe|TestProbeServeLarge|TestProbeNginx|TestProbeNode|TestProbePlanted|TestProbeTwoLimits|TestPlanEmittedLoop|TestProbeBySource|TestProbeCatchesLostUpdates|TestProbeStopped|TestProbeExpect|TestLabOutage)$$

# A binary built with -race sleeps a second before it exits, by default,
# for a goroutine still running to report a race: a second for each of
# the 22 test binaries, in which its slot of -p 3 does nothing (a package
# of 0.05 s of tests took 1.07 s). The tests stop their goroutines; a
# tenth of a second is left for one that does not.
GORACE ?= atexit_sleep_ms=100

# The two runs' command lines name every package and test they take
# (2,462 and 638 characters): each says what it runs in a line instead.
race: $(ENVOYCHECK)
	@echo "go test -race -shuffle=on -p 3: $(words $(RACE_PKGS)) packages, the slowest first, but for the tests of make test-clocked and NORACE"
	@GORACE='$(GORACE)' ENVOYCHECK=$(abspath $(ENVOYCHECK)) ENVOYCHECK_REQUIRED=1 REDIS_REQUIRED=1 tools/with-redis $(GO) test -race -vet=off -shuffle=on -count=1 -p 3 -skip '$(TIMED)|$(NORACE)' $(RACE_PKGS)

# What keeps NORACE_PKGS free of goroutines: a go statement in one of
# them fails make test, which then says where it belongs.
norace:
	@if grep -n -E '(^|[^a-zA-Z_.])go (func|[a-zA-Z_][a-zA-Z0-9_.]*\()' $(addsuffix /*.go,$(NORACE_PKGS)); then \
	  echo "make norace: the lines above start goroutines: move their package from NORACE_PKGS to the race-detected run"; exit 1; fi
	REDIS_REQUIRED=1 tools/with-redis $(GO) test -vet=off -shuffle=on -count=1 $(NORACE_PKGS)
	@echo "go test -shuffle=on -run NORACE (the Makefile lists them) ./limiters ./limiters/composite ./limiters/internal/keytable ./limiters/redislimit ./probe ./plan"
	@REDIS_REQUIRED=1 tools/with-redis $(GO) test -vet=off -shuffle=on -count=1 -run '$(NORACE)' ./limiters ./limiters/composite ./limiters/internal/keytable ./limiters/redislimit ./probe ./plan

## test-clocked: the tests that judge a limiter by the clock (the probes of ratelab serve, nginx, npm's limiters and planted ones, of the plan's emitted nginx and tier file, and the outage run), by themselves (CI runs it after make test)
test-clocked-steps:
	@mkdir -p $(OUT) && rm -f $(OUT)/probe-again.txt
	PROBE_AGAIN_LOG=$(abspath $(OUT))/probe-again.txt REDIS_REQUIRED=1 tools/with-redis tools/with-nginx tools/with-node $(GO) test -vet=off -count=1 -parallel 50 -timeout 20m -run '$(TIMED_PROBE)' ./probe; \
	  status=$$?; if [ -s $(OUT)/probe-again.txt ]; then echo "Probes that missed at first, three at once, and were probed again, alone:"; cat $(OUT)/probe-again.txt; fi; exit $$status
	tools/with-nginx tools/with-haproxy tools/with-caddy $(GO) test -vet=off -count=1 -parallel 50 -run '$(TIMED_LOOP)' ./cmd/ratelab
	tools/with-haproxy tools/with-caddy $(GO) test -vet=off -count=1 -run '^(TestHAProxyChecks|TestCaddyChecks)$$' ./products
	GORACE='$(GORACE)' REDIS_REQUIRED=1 tools/with-redis $(GO) test -race -vet=off -shuffle=on -count=1 -p 2 -parallel 2 -run '$(TIMED_RACE)' ./probe ./harness ./cmd/ratelab

## install-check: go install the command as a user does, from a module proxy on disk built from this tree's releases (tools/releases) and HEAD, then its quick lab in simulated time; and GOWORK=off go build and go vet (about a minute; CI runs it)
# The project's modules come from the proxy on disk, the rest from the
# usual one; GONOSUMDB, since the checksum database has never seen them
# (go.sum holds the library's hashes; the command installed at HEAD has
# none to check).
# HEAD is served as its own pseudo-version, so that the module cache, which
# keeps what it downloads, never holds another commit under the same name.
HEAD_VERSION = v0.0.0-$$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)-$$(git rev-parse --short=12 HEAD)
PROXY_ENV = GOWORK=off GOPROXY=file://$(CURDIR)/$(OUT)/proxy,$$($(GO) env GOPROXY) GONOSUMDB=github.com/ratelab/ratelab
install-check:
	cd tools && GOWORK=off $(GO) build -o ../$(BIN)/modproxy ./modproxy
	rm -rf $(OUT)/proxy $(OUT)/install
	$(BIN)/modproxy -out $(OUT)/proxy $$(awk '!/^#/ && NF { print $$1 "@" $$2 "=" $$3 ":" $$4 }' tools/releases) github.com/ratelab/ratelab@$(HEAD_VERSION)=HEAD
	$(PROXY_ENV) $(GO) build ./...
	$(PROXY_ENV) $(GO) vet ./...
	$(PROXY_ENV) GOBIN=$(CURDIR)/$(OUT)/install $(GO) install github.com/ratelab/ratelab/cmd/ratelab@$(HEAD_VERSION)
	$(OUT)/install/ratelab bench --quick --modes simulated --out $(OUT)/install/lab > $(OUT)/install/bench.txt
	@echo "make install-check: installed $(OUT)/install/ratelab from the proxy; its quick simulated lab: $(OUT)/install/bench.txt"

## soak: the linearizability checks on 300 histories a case, not make test's 3 (Redis as for make test)
soak:
	REDIS_REQUIRED=1 tools/with-redis $(GO) test -count=1 -timeout 30m ./internal/lincheck -args -soak=300

## soak-serve: ratelab serve for 10 minutes a backend (memory, Redis) at 80% of the highest rate it keeps here, 100,000 keys and slow clients beside: its memory, descriptors, threads and goroutines every 10s (about 22 minutes)
soak-serve:
	REDIS_REQUIRED=1 tools/with-redis $(GO) test -count=1 -timeout 60m -run TestServeSoak -v ./cmd/ratelab -args -soak=$(or $(SOAK),10m)

## flood: ratelab serve sent 10 million distinct 126-byte keys, with no key cap and with the default (1,000,000): its resident memory at every million (about an hour)
flood:
	$(GO) test -count=1 -timeout 3h -run TestServeFlood -v ./cmd/ratelab -args -flood=$(or $(KEYS),10000000)

## memcheck: 10 million distinct keys through GCRA and the sliding log in memory, the live heap at 1M, 5M and 10M (about a minute, 2 GB)
memcheck:
	$(GO) test -count=1 -run TestManyKeys -v ./limiters/composite -args -manykeys=10000000 | grep -E 'keys sent|^(---|ok|FAIL)'

# The commit the gate times the working tree against: the first line of
# results/gate-base that is not a comment (make baseline sets it), unless
# BASE is given (make gate BASE=main).
BASE      ?= $(shell grep -v '^\#' results/gate-base 2>/dev/null | head -n 1)

## gate: time the tree against the base commit in one run, A/B, and compare its quick lab with the committed baseline (about a minute)
gate:
	@mkdir -p $(OUT)
	$(GO) build -o $(OUT)/ratelab ./cmd/ratelab
	$(OUT)/ratelab gate --base "$(BASE)" --baseline $(BASELINE) --out $(OUT)/gate $(if $(NO_BASE_OK),--no-base-ok)

## baseline: the committed figures (three quick labs in simulated time and for memory, pooled) and HEAD as the gate's base (commit the result; about a minute)
baseline:
	@if [ -n "$$(git status --porcelain --untracked-files=no -- . ':!$(BASELINE)' ':!results/gate-base')" ]; then \
	  echo "make baseline: the tree has changes not committed; the base it names is HEAD, which lacks them. Commit them first."; exit 1; fi
	@mkdir -p $(OUT)/baseline
	$(GO) build -o $(OUT)/ratelab ./cmd/ratelab
	for i in 1 2 3; do $(OUT)/ratelab bench --quick --modes simulated,memory --redis=false --out $(OUT)/baseline/$$i > $(OUT)/baseline/$$i.txt || exit 1; done
	$(OUT)/ratelab merge --out $(BASELINE) $(OUT)/baseline/1/results.json $(OUT)/baseline/2/results.json $(OUT)/baseline/3/results.json
	@{ echo "# The commit make gate times the working tree against (ratelab gate --base)."; \
	  echo "# make baseline sets it to HEAD; a branch or a tag will do as well."; \
	  git rev-parse HEAD; } > results/gate-base
	@echo "The base is now $$(git rev-parse --short HEAD). Commit $(BASELINE) and results/gate-base (git diff --stat results/)."

## bench: the lab: every limiter and its peers through every workload, then make plan (the Redis rows need a server, else they are skipped)
bench-steps:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/ratelab
	$(BIN)/ratelab bench --out $(OUT)
	@$(MAKE) --no-print-directory plan

## plan: ratelab plan on the synthetic shop's access log (PLAN_LINES lines of nginx's combined format, written as they are read: two hours of users, a sale's peak, eight abusers and three offices), into out/plan: the plain command, on every core, within its default --memory
PLAN_LINES ?= 10000000
plan-steps:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/ratelab ./cmd/genlog
	$(BIN)/genlog -lines $(PLAN_LINES) | $(BIN)/ratelab plan --out $(OUT)/plan

## readme-check: the README's figures against this host: a quick lab, the plan of the synthetic shop, the memory benchmark, and the times in out/times.tsv; flags each figure outside the range the README states
readme-check-steps:
	@mkdir -p $(BIN) $(OUT)/readme
	$(GO) build -o $(BIN)/ ./cmd/ratelab ./cmd/genlog
	tools/with-redis $(BIN)/ratelab bench --quick --out $(OUT)/readme/lab > $(OUT)/readme/lab.txt
	$(BIN)/genlog -lines $(PLAN_LINES) 2> $(OUT)/readme/genlog.txt | $(BIN)/ratelab plan --out $(OUT)/readme/plan > $(OUT)/readme/plan.txt
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkMemory$$/lim=(fixed-window|sliding-log|sliding-counter|token-bucket|leaky-bucket|gcra)/' -benchtime 1x ./harness/peers > $(OUT)/readme/memory.txt
	$(GO) test -count=1 -run '^TestREADME$$' -v ./internal/readme -args -measured=$(abspath $(OUT))/readme -times=$(abspath $(OUT))/times.tsv

## install: the ratelab command, from this tree, into go env GOBIN (else go env GOPATH's bin, $HOME/go/bin): on the PATH where that is (make bench leaves it in out/bin as well)
install:
	$(GO) install ./cmd/ratelab
	@dir=$$($(GO) env GOBIN); dir=$${dir:-$$($(GO) env GOPATH)/bin}; \
	echo "ratelab is $$dir/ratelab"; \
	case ":$$PATH:" in *":$$dir:"*) ;; *) echo "$$dir is not on your PATH: export PATH=\"$$dir:\$$PATH\"";; esac

## bench-quick: ratelab bench --quick: all but the outage runs, each shorter
bench-quick-steps:
	$(GO) run ./cmd/ratelab bench --quick --out $(OUT)/quick

## bench-go: the Go benchmarks of one decision, with benchstat
bench-go: bench-go-run bench-go-report

bench-go-run:
	@mkdir -p $(OUT)
	$(GO) test ./harness/peers -run '^$$' -bench . -count $(COUNT) -benchtime $(BENCHTIME) | tee $(OUT)/bench.txt

# The cases BenchmarkDecide runs: keys/limit/procs.
CASES := hot/unlimited/1 hot/strict/1 hot/strict/2 zipf100k/strict/1 zipf100k/strict/2 uniform100k/strict/2

bench-go-report: $(BENCHSTAT)
	@for c in $(CASES); do \
	  keys=$${c%%/*}; rest=$${c#*/}; limit=$${rest%%/*}; procs=$${rest#*/}; \
	  echo; echo "== keys=$$keys limit=$$limit goroutines=$$procs: wall time per decision =="; \
	  $(BENCHSTAT) -filter ".name:Decide .unit:sec/op /keys:$$keys /limit:$$limit /procs:$$procs" \
	    -row /lim,/clock -col .name $(OUT)/bench.txt | sed -n '/│/,$$p'; \
	done
	@echo; echo "== Live heap per key at 1,000,000 keys of 16 bytes, the key included =="
	@$(BENCHSTAT) -filter '.name:Memory .unit:B/key' -row /lim -col .name $(OUT)/bench.txt | sed -n '/│/,$$p'
	@echo; echo "clock: mono is ratelab's default (a monotonic reading per decision), coarse is"
	@echo "limiters.CoarseClock at 1ms, own is the peer's. Raw results: $(OUT)/bench.txt"

clean:
	rm -rf $(OUT)
