// Package results is the lab's result format: one JSON file per run of the
// lab, and the tables made from it.
//
// The field names are a public format: CI and users parse them. A change
// that renames or removes a field, or changes what one means, bumps Schema.
package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Schema is the version of the format this package writes and reads.
// Version 2 added the timing runs (mode "timing", with rounds) and
// allocations per decision.
const Schema = 2

// File is one run of the lab.
type File struct {
	Schema int   `json:"schema"`
	Meta   Meta  `json:"meta"`
	Runs   []Run `json:"runs"`
}

// Meta says where, when and how the lab ran.
type Meta struct {
	Seed       uint64    `json:"seed"`
	GoVersion  string    `json:"go_version"`
	CPU        string    `json:"cpu"`
	Cores      int       `json:"cores"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	Start      time.Time `json:"start"`
	Elapsed    Seconds   `json:"elapsed_s"`
	// SimulationPerS is how many decisions a second the simulated runs
	// made on one core, limiters and harness together (here, not in the
	// runs, so that simulated runs are the same byte for byte).
	SimulationPerS float64 `json:"simulation_decisions_per_s,omitempty"`
	// Merged is, for a file Merge made, how many runs of the lab it pools.
	Merged int    `json:"merged,omitempty"`
	Params Params `json:"params"`
}

// Params are every parameter of the run.
type Params struct {
	Quick bool `json:"quick"`
	// Limit is the limit every limiter is given: N per W for the window
	// algorithms, a capacity of N refilled over W for the buckets.
	Limit     int      `json:"limit"`
	Window    Seconds  `json:"window_s"`
	Limiters  []string `json:"limiters"`
	Workloads []string `json:"workloads"`
	Modes     []string `json:"modes"`
	// Users is the population of the uniform and bursty workloads,
	// Attackers that of the boundary attack, ManyUsers that of many-users
	// and of the memory runs.
	Users     int `json:"users"`
	Attackers int `json:"attackers"`
	ManyUsers int `json:"many_users"`
	// Simulated is how much time each simulated workload spans.
	Simulated Seconds `json:"simulated_s"`
	// Goroutines are the counts the unpaced real-time runs sweep;
	// LatencyGoroutines sends the paced runs at OfferedRate.
	Goroutines        []int   `json:"goroutines"`
	RealTime          Seconds `json:"realtime_s"`
	LatencyGoroutines int     `json:"latency_goroutines"`
	OfferedRate       float64 `json:"offered_rate_per_s"`
	// LatencyRuns is how many times each paced run was repeated.
	LatencyRuns int `json:"latency_runs,omitempty"`
	// RealTimeAccuracyScale is how much time is compressed when a limiter
	// that takes no explicit time has its accuracy measured in real time.
	RealTimeAccuracyScale float64 `json:"realtime_accuracy_scale"`
	// TimingRounds is how many rounds the timing runs took, each limiter
	// and the harness floor deciding for TimingSample in turn in each.
	TimingRounds int     `json:"timing_rounds,omitempty"`
	TimingSample Seconds `json:"timing_sample_s,omitempty"`
	// Redis is how the lab ran the limiters kept in Redis; nil when it
	// ran none.
	Redis *RedisParams `json:"redis,omitempty"`
}

// RedisParams say how the lab ran the limiters kept in a Redis server,
// each decision a round trip to it: on less than the others, so that the
// lab takes a minute more, not an hour.
type RedisParams struct {
	// Addr is the server, host:port/db (never a password); Prefix starts
	// every key the run wrote there (after "rate:", for redis_rate's), all
	// removed when it ended.
	Addr   string `json:"addr"`
	Prefix string `json:"prefix"`
	// Users and Simulated bound the simulated runs: the first Users users
	// of each workload (attackers, for the boundary attack) over its first
	// Simulated.
	Users     int     `json:"users"`
	Simulated Seconds `json:"simulated_s"`
	// RealTime is how long each unpaced run lasts; LatencyTime the paced
	// one, at OfferedRate.
	RealTime    Seconds `json:"realtime_s"`
	LatencyTime Seconds `json:"latency_s"`
	OfferedRate float64 `json:"offered_rate_per_s"`
	// Keys is how many keys the memory runs give the server.
	Keys int `json:"keys"`
}

// Run is one limiter under one workload in one mode.
type Run struct {
	// Limiter names the implementation: a ratelab algorithm ("gcra") or
	// a peer library ("x/time/rate").
	Limiter string `json:"limiter"`
	// Library is the Go module and version measured.
	Library   string `json:"library"`
	Algorithm string `json:"algorithm"`
	Backend   string `json:"backend"`
	Workload  string `json:"workload"`
	// Mode is "simulated" (explicit times, for accuracy), "realtime"
	// (goroutines on the real clock), "timing" (a limiter's samples
	// interleaved with the harness floor's), "memory" or "http".
	Mode string `json:"mode"`
	// Goroutines and OfferedRate describe a real-time run: how many
	// senders, and at what total rate (0: as fast as each can go).
	Goroutines  int     `json:"goroutines,omitempty"`
	OfferedRate float64 `json:"offered_rate_per_s,omitempty"`
	// Judged is the N per W a run's accuracy is measured against: for a
	// bucket, its capacity C over C/R.
	Judged *Judged `json:"judged,omitempty"`
	// Decisions is how many decisions the run made.
	Decisions int64 `json:"decisions"`

	Accuracy *Accuracy `json:"accuracy,omitempty"`
	// LatencyNS is, for a paced real-time run, from each request's
	// intended send time to its decision; for an unpaced one, the time of
	// one decision, sampled on one request in 16. LatencyCurveNS is the
	// same distribution at more quantiles, for plotting.
	LatencyNS      *Latency   `json:"latency_ns,omitempty"`
	LatencyCurveNS []Quantile `json:"latency_curve_ns,omitempty"`
	// LatencyRunsNS are, for a paced run repeated (Params.LatencyRuns),
	// each repetition's latency: LatencyNS is their median, quantile by
	// quantile, and LatencyCurveNS that of all their requests together.
	LatencyRunsNS  []Latency `json:"latency_runs_ns,omitempty"`
	ThroughputPerS float64   `json:"throughput_per_s,omitempty"`
	BytesPerUser   float64   `json:"bytes_per_user,omitempty"`
	// Users is, for a memory run, the keys the limiter was given.
	Users           int      `json:"users,omitempty"`
	LockWaitNSPerOp *float64 `json:"lock_wait_ns_per_op,omitempty"`
	// AdmittedFraction is, for a real-time run, the share of decisions
	// that admitted; AchievedFraction, for a paced one, the share of the
	// offered rate sent, and LateFraction the share of requests decided
	// more than a millisecond after their intended time.
	AdmittedFraction *float64 `json:"admitted_fraction,omitempty"`
	AchievedFraction *float64 `json:"achieved_fraction,omitempty"`
	LateFraction     *float64 `json:"late_fraction,omitempty"`
	// TimeScale and SendLagNS describe an accuracy run in real time: time
	// was compressed by TimeScale, and requests were sent this late
	// against their compressed schedule.
	TimeScale float64  `json:"time_scale,omitempty"`
	SendLagNS *Latency `json:"send_lag_ns,omitempty"`
	// Floor says the limiter decided nothing and admitted everything: what
	// the harness, or a round trip to Redis, costs alone.
	Floor bool `json:"floor,omitempty"`
	// SkippedBecause says why a run did not happen.
	SkippedBecause string `json:"skipped_because,omitempty"`
	// Note says how a run differs from the others of its table (a
	// limiter kept in Redis runs on a sample of the workload, say); the
	// tables print each note once.
	Note string `json:"note,omitempty"`
	// DiffersFromMemory is, for an accuracy run of a limiter kept outside
	// the process, how many of its decisions differed from those of the
	// same algorithm in memory on the same requests: 0 when the backend
	// is exact.
	DiffersFromMemory *int64 `json:"differs_from_memory,omitempty"`
	// HTTP, for an http run, counts the answers to the requests sent.
	HTTP *HTTP `json:"http,omitempty"`
	// Fleet, for a fleet run, says how the processes shared the server
	// and what that cost.
	Fleet *Fleet `json:"fleet,omitempty"`
	// LLM, for an llm run, says how its requests, whose costs were known
	// only after, were charged, and what that admitted.
	LLM *LLM `json:"llm,omitempty"`
	// Outage, for an outage run, is what the server of ratelab serve
	// answered while its Redis was taken away and given back.
	Outage *Outage `json:"outage,omitempty"`
	// OwnLimits, when set, says the limiter had limits of its own (a
	// configuration's tiers), not the lab's N per W: its costs compare
	// with the others', its decisions do not, and the picks leave it out.
	OwnLimits string `json:"own_limits,omitempty"`
	// Edge is, for an accuracy run on the boundary attack, what one
	// attacker had admitted in the trailing window after each of its
	// requests, over the first few windows: the picture of a window edge.
	Edge *Series `json:"edge_series,omitempty"`
	// AllocsPerDecision is, for an accuracy run, the heap allocations per
	// decision in steady state: over a second pass of the workload, after
	// the first has made the keys. (A key idle long enough to be forgotten
	// is made again, as it would be in service: many-users' rare users.)
	AllocsPerDecision *float64 `json:"allocs_per_decision,omitempty"`
	// Rounds are, for a timing run, its samples: one goroutine deciding
	// as fast as it can for a short time, every limiter in turn with the
	// harness floor sampled between each two, round after round, so that
	// each of a limiter's samples has a floor sample just before and just
	// after it, on the same machine in the same moment.
	Rounds []Round `json:"rounds,omitempty"`
}

// Outside reports whether r's limiter kept its state outside the process,
// in a Redis server: each decision a round trip, so the lab runs it on a
// sample (RedisParams), compare leaves it out (the server is not the
// tree's to regress, and may be absent), and the picks for one
// process do not weigh it against the limiters in memory.
func (r Run) Outside() bool { return r.Backend == "redis" }

// Round is one round of a timing run: a limiter's sample and the harness
// floor's around it (the floor's own run has only its samples).
type Round struct {
	Sample
	FloorBefore *Sample `json:"floor_before,omitempty"`
	FloorAfter  *Sample `json:"floor_after,omitempty"`
}

// Sample is one stretch of one goroutine deciding as fast as it can.
type Sample struct {
	ThroughputPerS float64 `json:"throughput_per_s"`
	// P50NS and P90NS are quantiles of the time of one decision, each
	// value the mean over a stretch of consecutive decisions (256 in this
	// ratelab): the clock is too coarse to time one.
	P50NS float64 `json:"p50_ns"`
	P90NS float64 `json:"p90_ns"`
}

// Quantile is a value at a quantile Q of a distribution.
type Quantile struct {
	Q     float64 `json:"q"`
	Value float64 `json:"value"`
}

// Series is what one key had admitted in the trailing window of length W,
// in cost, after each of its requests: at T[i] seconds, InWindow[i].
type Series struct {
	Key      string    `json:"key"`
	T        []float64 `json:"t_s"`
	InWindow []float64 `json:"in_window"`
}

// Judged is a limit: N per W.
type Judged struct {
	Limit  int     `json:"limit"`
	Window Seconds `json:"window_s"`
}

// Accuracy compares a limiter's decisions with the ideal's (the sliding
// window log, exact, on the same arrivals).
type Accuracy struct {
	// Admitted is how many requests the limiter admitted; Ideal how many
	// the ideal did.
	Admitted int64 `json:"admitted"`
	Ideal    int64 `json:"ideal_admitted"`
	// FalseAllow counts requests the limiter admitted and the ideal
	// denied; FalseDeny the other way round. The rates are per request.
	FalseAllow     int64   `json:"false_allow"`
	FalseDeny      int64   `json:"false_deny"`
	FalseAllowRate float64 `json:"false_allow_rate"`
	FalseDenyRate  float64 `json:"false_deny_rate"`
	// MaxWindowRatio is the most cost one key had admitted in any
	// interval of length W, divided by N: 1 for an exact limiter, up to
	// 2 for a fixed window.
	MaxWindowRatio float64 `json:"max_window_ratio"`
}

// Latency is the distribution of one decision's latency, in nanoseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// MedianLatency is the median of runs, quantile by quantile.
func MedianLatency(runs []Latency) Latency {
	of := func(q func(Latency) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = q(r)
		}
		return medianOf(v)
	}
	return Latency{
		P50:  of(func(l Latency) float64 { return l.P50 }),
		P90:  of(func(l Latency) float64 { return l.P90 }),
		P99:  of(func(l Latency) float64 { return l.P99 }),
		P999: of(func(l Latency) float64 { return l.P999 }),
		Max:  of(func(l Latency) float64 { return l.Max }),
	}
}

// CPUModel is this machine's CPU model name, as Meta records it: from
// /proc/cpuinfo where there is one, else the architecture.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// Seconds is a duration written as a number of seconds.
type Seconds float64

// Duration converts s.
func (s Seconds) Duration() time.Duration { return time.Duration(float64(s) * 1e9) }

// ErrSchema reports a file written in another version of the format.
var ErrSchema = errors.New("results: schema version mismatch")

// Write writes f as indented JSON.
func Write(w io.Writer, f *File) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

// WriteFile writes f to path, whole or not at all: it writes a temporary
// file beside path and renames it.
func WriteFile(path string, f *File) error {
	var b bytes.Buffer
	if err := Write(&b, f); err != nil {
		return err
	}
	return WriteAtomic(path, b.Bytes())
}

// WriteAtomic writes data to path through a temporary file and a rename,
// readable by all: a reader never sees half a file.
func WriteAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644) // CreateTemp's 0600 is for secrets
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// Read reads a file written by Write, refusing another schema version and
// fields this version does not know.
func Read(r io.Reader) (*File, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	// The version first, so that a file of another version is named as
	// such rather than as one with fields this version does not know.
	var v struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("results: %s%w", where(data, err), err)
	}
	switch {
	case v.Schema == nil:
		return nil, fmt.Errorf("results: not a results file: no schema version")
	case *v.Schema != Schema:
		return nil, fmt.Errorf("%w: the file is version %d, this ratelab reads %d", ErrSchema, *v.Schema, Schema)
	}
	var f File
	if err := decodeStrict(data, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// decodeStrict decodes data into v, refusing fields v does not have, and
// says where in data an error is.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("results: %s%w", where(data, err), err)
	}
	return nil
}

// where returns "line L, column C: " for a JSON error that has an offset
// into data, "" for one that has not: the character a syntax error
// stopped at, or the end of the value of the wrong type.
func where(data []byte, err error) string {
	var off int64
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	default:
		return ""
	}
	before := data[:min(max(off-1, 0), int64(len(data)))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d: ", line, col)
}

// ReadFile reads the file at path.
func ReadFile(path string) (*File, error) {
	in, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	f, err := Read(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Fleet is a fleet run: Processes processes, each with a client and a
// limiter of its own, sharing one Redis server, the workload's requests
// routed to them as a load balancer would (Routing: "random", or "sticky"
// by key). Its accuracy is in simulated time, on the sample of the
// workload the Redis rows decide; its throughput and latency in real time.
type Fleet struct {
	Processes int    `json:"processes"`
	Routing   string `json:"routing"`
	// RoundTripsSimulated and RoundTrips are the round trips to Redis a
	// decision, as the clients counted them, in simulated time and in
	// real time.
	RoundTripsSimulated float64 `json:"round_trips_per_decision_simulated"`
	RoundTrips          float64 `json:"round_trips_per_decision"`
	// RoundTripsPerAdmitted is the round trips in simulated time over the
	// decisions that admitted.
	RoundTripsPerAdmitted float64 `json:"round_trips_per_admitted_simulated,omitempty"`
	// Lease is whether the processes leased quota (approximate).
	Lease bool `json:"lease,omitempty"`
	// ServerCPUNS is the server's CPU time a decision in the real-time
	// run (INFO cpu, user and system), in nanoseconds.
	ServerCPUNS float64 `json:"server_cpu_ns_per_decision"`
}

// LLM is an llm run: requests to an LLM endpoint limited to Limit tokens
// per Window, each request's actual tokens log-normal of mean Mean and
// shape Spread, at most Max, known only once its response is done, its
// client sending the estimate Estimate (0 for a way of charging that uses
// none); charged as Charge says ("estimate
// only", "estimate then settle", "max then settle", or "actual up front"
// for reference). Asked is the actual tokens of every request; Tokens
// those of the requests admitted, IdealTokens of those the ideal admitted
// (the sliding log, each request at its actual cost when sent). The run's
// Accuracy is judged on the actual costs.
type LLM struct {
	Charge      string  `json:"charge"`
	Mean        float64 `json:"mean"`
	Spread      float64 `json:"spread"`
	Estimate    int     `json:"estimate,omitempty"`
	Max         int     `json:"max"`
	Limit       int     `json:"limit"`
	Window      Seconds `json:"window"`
	Asked       int64   `json:"asked_tokens"`
	Tokens      int64   `json:"tokens"`
	IdealTokens int64   `json:"ideal_tokens"`
}

// Outage is an outage run: the server of ratelab serve deciding on Redis
// through a proxy, attacked over loopback at Rate requests a second by
// Users users each asking for twice its limit (Limit per Window), with
// Redis taken away at Away seconds from the start (Kind: "refused", as a
// server that is down; "unanswered", as a network that drops everything)
// and given back at Back, the server failing as Failure says ("open",
// "closed", or "fallback": in memory at the limit divided by Fleet).
type Outage struct {
	Kind    string  `json:"kind"`
	Failure string  `json:"failure"`
	Fleet   int     `json:"fleet,omitempty"`
	Rate    float64 `json:"rate"`
	Users   int     `json:"users"`
	Limit   int     `json:"limit"`
	Window  Seconds `json:"window"`
	Away    Seconds `json:"away"`
	Back    Seconds `json:"back"`
	// Bins count the answers to the requests sent in each Bin of the run,
	// from its start.
	Bin  Seconds   `json:"bin"`
	Bins []Answers `json:"bins"`
	// Failed are the decisions the server made without Redis (it failed,
	// or the breaker was open) in each Bin, from its metrics.
	Failed []int64 `json:"failed"`
	// Before, During and After are the requests sent before Redis was
	// taken away, while it was away, and after it was given back.
	Before Span `json:"before"`
	During Span `json:"during"`
	After  Span `json:"after"`
	// Recovery is how long after Redis was given back the server's last
	// failed decision came: from then on Redis decided every request.
	// (The metrics are read every 10ms, which bounds its precision.) Nil
	// when decisions were still failing at the end of the run.
	Recovery *Seconds `json:"recovery,omitempty"`
}

// Answers count the answers to some requests: 200, 429, 503, any other
// status, and none at all.
type Answers struct {
	OK          int64 `json:"ok"`
	Limited     int64 `json:"limited"`
	Unavailable int64 `json:"unavailable"`
	Other       int64 `json:"other,omitempty"`
	Errors      int64 `json:"errors,omitempty"`
}

// Count counts an answer of status code (0 with err: none).
func (a *Answers) Count(code uint16, err string) {
	switch {
	case code == 0 && err != "":
		a.Errors++
	case code == 200:
		a.OK++
	case code == 429:
		a.Limited++
	case code == 503:
		a.Unavailable++
	default:
		a.Other++
	}
}

// Total is how many answers, or none, a counts.
func (a Answers) Total() int64 { return a.OK + a.Limited + a.Unavailable + a.Other + a.Errors }

// Span is the requests of a stretch of an outage run: their answers, and
// the latency of those answered.
type Span struct {
	Answers
	LatencyNS Latency `json:"latency_ns"`
}

// HTTP counts the answers of an http run: requests sent over loopback to
// the server of ratelab serve by vegeta.
type HTTP struct {
	// OK were answered 200, Limited 429, Other anything else, and Errors
	// not at all.
	OK      int64 `json:"ok"`
	Limited int64 `json:"limited"`
	Other   int64 `json:"other"`
	Errors  int64 `json:"errors"`
	// Ideal is how many the limit admits: the same requests, at the
	// times they were sent, through the same algorithm in memory.
	Ideal      int64  `json:"ideal"`
	FirstError string `json:"first_error,omitempty"`
	// Window is the limit's window W of the run, scaled so that each key
	// is asked for the workload's multiple of its limit.
	Window Seconds `json:"window"`
}
