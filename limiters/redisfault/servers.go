package redisfault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Servers are redis-server processes of the caller's own on loopback,
// keeping nothing on disk but their configuration, each in a folder of
// its own under one folder. Kill stops one as a crash does; Close stops
// them all.
type Servers struct {
	dir string

	mu      sync.Mutex
	procs   map[string]*exec.Cmd // by address
	args    map[string][]string  // each server's arguments, by address
	proxies []*Proxy
}

// NewServers returns an empty set of servers kept under dir. It fails
// when redis-server is not installed.
func NewServers(dir string) (*Servers, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is needed to start servers of one's own (Debian: apt-get install redis-server): %w", err)
	}
	return &Servers{dir: dir, procs: map[string]*exec.Cmd{}, args: map[string][]string{}}, nil
}

// freePort returns a loopback port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Start starts a redis-server on a free loopback port with the settings of
// lines (redis.conf lines; "sentinel" among them makes it a Sentinel),
// waits until it answers, and returns its address.
func (s *Servers) Start(lines ...string) (string, error) {
	for try := 0; ; try++ {
		addr, err := s.StartOn(0, lines...)
		// A port free a moment ago may be taken meanwhile: try another.
		if err == nil || try == 2 || !strings.Contains(err.Error(), "Address already in use") {
			return addr, err
		}
	}
}

// StartOn is Start on port, or on a free one for port 0: a server that
// comes back on the address of one that stopped, with nothing of its.
func (s *Servers) StartOn(port int, lines ...string) (string, error) {
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return "", err
		}
	}
	addr := fmt.Sprint("127.0.0.1:", port)
	dir := filepath.Join(s.dir, strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sentinel := false
	conf := []string{"port " + strconv.Itoa(port), "bind 127.0.0.1", `save ""`, "appendonly no", "repl-diskless-sync-delay 0", "dir " + dir, "logfile " + filepath.Join(dir, "log")}
	for _, l := range lines {
		if l == "sentinel" {
			sentinel = true
			continue
		}
		conf = append(conf, l)
	}
	file := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(file, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	args := []string{file}
	if sentinel {
		args = append(args, "--sentinel")
	}
	return addr, s.run(addr, args)
}

// run starts redis-server with args, to listen on addr, and waits until
// it answers there.
func (s *Servers) run(addr string, args []string) error {
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.mu.Lock()
	s.procs[addr], s.args[addr] = cmd, args
	s.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); c.Ping(context.Background()).Err() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(filepath.Dir(args[0]), "log"))
			return fmt.Errorf("redis-server on %s did not answer within 5s: %s", addr, tail(log))
		}
	}
	return nil
}

// Restart starts again the server at addr, killed, as a supervisor
// would: same port, same configuration. A Sentinel turns a master that
// comes back into a replica of the one it promoted; a Cluster node comes
// back as the replica of the one that took its place.
func (s *Servers) Restart(addr string) error {
	s.mu.Lock()
	args, running := s.args[addr], s.procs[addr] != nil
	s.mu.Unlock()
	switch {
	case args == nil:
		return fmt.Errorf("no server of ours at %s", addr)
	case running:
		return fmt.Errorf("the server at %s is running", addr)
	}
	return s.run(addr, args)
}

// tail is the last lines of a log, for an error.
func tail(log []byte) string {
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	return strings.Join(lines[max(len(lines)-5, 0):], "\n")
}

// Kill stops the server at addr with SIGKILL, as a crash: it answers
// nothing more and writes nothing out, and what it had not yet sent its
// replicas is lost.
func (s *Servers) Kill(addr string) error {
	s.mu.Lock()
	cmd := s.procs[addr]
	delete(s.procs, addr)
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("no server of ours at %s", addr)
	}
	err := cmd.Process.Kill()
	cmd.Wait()
	return err
}

// Close kills every server still running, and the proxies.
func (s *Servers) Close() {
	s.mu.Lock()
	procs, proxies := s.procs, s.proxies
	s.procs, s.proxies = map[string]*exec.Cmd{}, nil
	s.mu.Unlock()
	for _, cmd := range procs {
		cmd.Process.Kill()
		cmd.Wait()
	}
	for _, p := range proxies {
		p.Close()
	}
}

// A Sentinel set-up is a master, a replica and three Sentinels watching
// them, as production runs Redis with automatic failover: when the master
// stops answering for the down-after time, the Sentinels agree and
// promote the replica. Replication is asynchronous, as there.
type Sentinel struct {
	*Servers
	// Name is the master's name, which the Sentinels know it by.
	Name      string
	Sentinels []string
	// Lag is how long the replica's link holds what the master sends it
	// (a proxy between them; zero: none).
	Lag time.Duration
}

// SentinelDownAfter is how long a Sentinel set-up's Sentinels wait for a
// master that does not answer before they fail it over.
const SentinelDownAfter = 500 * time.Millisecond

// NewSentinel starts a Sentinel set-up under dir: a master, a replica
// whose link from the master holds each write for lag (zero: a direct
// link), and three Sentinels, quorum two. It returns once the Sentinels
// know the replica.
func NewSentinel(dir string, lag time.Duration) (_ *Sentinel, err error) {
	s, err := NewServers(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	master, err := s.Start()
	if err != nil {
		return nil, err
	}
	upstream := master
	if lag > 0 {
		p, err := NewProxy(master)
		if err != nil {
			return nil, err
		}
		p.Delay = lag
		p.Set(Slow)
		s.mu.Lock()
		s.proxies = append(s.proxies, p)
		s.mu.Unlock()
		upstream = p.Addr()
	}
	host, port, _ := net.SplitHostPort(upstream)
	replica, err := s.Start("replicaof " + host + " " + port)
	if err != nil {
		return nil, err
	}
	if err := synced(replica); err != nil {
		return nil, err
	}
	st := &Sentinel{Servers: s, Name: "ratelab", Lag: lag}
	host, port, _ = net.SplitHostPort(master)
	// Each Sentinel is told of the others and of the replica, which it
	// would otherwise learn of from their hellos and the master's INFO,
	// seconds later.
	var ports [3]int
	var ids [3]string
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
		ids[i] = fmt.Sprintf("%040x", i+1)
	}
	rhost, rport, _ := net.SplitHostPort(replica)
	for i := range ports {
		lines := []string{"sentinel", "sentinel myid " + ids[i], "sentinel monitor " + st.Name + " " + host + " " + port + " 2",
			fmt.Sprint("sentinel down-after-milliseconds ", st.Name, " ", SentinelDownAfter.Milliseconds()),
			"sentinel failover-timeout " + st.Name + " 10000",
			"sentinel known-replica " + st.Name + " " + rhost + " " + rport}
		for j := range ports {
			if j != i {
				lines = append(lines, fmt.Sprint("sentinel known-sentinel ", st.Name, " 127.0.0.1 ", ports[j], " ", ids[j]))
			}
		}
		addr, err := s.StartOn(ports[i], lines...)
		if err != nil {
			return nil, err
		}
		st.Sentinels = append(st.Sentinels, addr)
	}
	return st, st.known(replica)
}

// synced waits until the replica at addr has loaded the master's data.
func synced(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, _ := c.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica at %s did not sync within 10s: %s", addr, info)
		}
	}
}

// known waits until every Sentinel knows the replica at addr, and the
// other Sentinels.
func (st *Sentinel) known(replica string) error {
	ctx := context.Background()
	for _, a := range st.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: a})
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			replicas, _ := c.Replicas(ctx, st.Name).Result()
			sentinels, _ := c.Sentinels(ctx, st.Name).Result()
			if len(sentinels) == len(st.Sentinels)-1 && knowsReplica(replicas, replica) {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return fmt.Errorf("the Sentinel at %s did not learn of the replica %s and the other Sentinels within 15s (replicas %v, Sentinels %d)", a, replica, replicas, len(sentinels))
			}
		}
		c.Close()
	}
	return nil
}

// knowsReplica reports whether a Sentinel's replicas include addr, up.
func knowsReplica(replicas []map[string]string, addr string) bool {
	for _, r := range replicas {
		if r["ip"]+":"+r["port"] == addr && !strings.Contains(r["flags"], "down") {
			return true
		}
	}
	return false
}

// Master asks the Sentinels which server is the master now.
func (st *Sentinel) Master(ctx context.Context) (string, error) {
	var errs []error
	for _, a := range st.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: a})
		hp, err := c.GetMasterAddrByName(ctx, st.Name).Result()
		c.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no Sentinel named the master: %w", errors.Join(errs...))
}

// KillMaster kills the master (SIGKILL) and returns its address. Where
// the replica's link lags, the link is cut first, dropping what it
// holds: a master that dies takes with it what it had not yet delivered.
func (st *Sentinel) KillMaster(ctx context.Context) (string, error) {
	m, err := st.Master(ctx)
	if err != nil {
		return "", err
	}
	st.mu.Lock()
	proxies := st.proxies
	st.mu.Unlock()
	for _, p := range proxies {
		p.Set(Refused)
	}
	return m, st.Kill(m)
}

// Options are go-redis's failover options for the set-up: its master's
// name and Sentinels.
func (st *Sentinel) Options() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: st.Name, SentinelAddrs: st.Sentinels}
}

// A Cluster is a Redis Cluster of servers of one's own: masters, each
// with replicas. When a master stops answering for NodeTimeout, its
// replica takes its place.
type Cluster struct {
	*Servers
	// Addrs are every node's address, the masters first.
	Addrs    []string
	replicas int
}

// ClusterNodeTimeout is how long a Cluster's nodes wait for one that does
// not answer before they count it failed.
const ClusterNodeTimeout = 500 * time.Millisecond

// NewCluster starts a Redis Cluster under dir of masters masters (at
// least three), each with replicas replicas, made by redis-cli --cluster
// create, and returns once every node says the cluster is ok.
func NewCluster(dir string, masters, replicas int) (_ *Cluster, err error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("a Redis Cluster is made by redis-cli (Debian: apt-get install redis-tools): %w", err)
	}
	s, err := NewServers(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	c := &Cluster{Servers: s, replicas: replicas}
	for range masters * (1 + replicas) {
		var addr string
		// A port free a moment ago may be taken meanwhile (by another
		// test's connection, from the same range): try other ones, for
		// the server and its cluster bus both.
		for try := 0; ; try++ {
			bus, err := freePort() // not port+10000, which may be past 65535
			if err != nil {
				return nil, err
			}
			addr, err = s.StartOn(0, "cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-port "+strconv.Itoa(bus),
				fmt.Sprint("cluster-node-timeout ", ClusterNodeTimeout.Milliseconds()))
			if err == nil {
				break
			}
			if try == 2 || !strings.Contains(err.Error(), "Address already in use") {
				return nil, err
			}
		}
		c.Addrs = append(c.Addrs, addr)
	}
	args := append(append([]string{"--cluster", "create"}, c.Addrs...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	return c, c.ok()
}

// ok waits until every node says the cluster is ok and knows every
// other, and every master has its replicas in sync.
func (c *Cluster) ok() error {
	for _, a := range c.Addrs {
		n := redis.NewClient(&redis.Options{Addr: a})
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			info, _ := n.ClusterInfo(context.Background()).Result()
			nodes, _ := n.ClusterNodes(context.Background()).Result()
			repl, _ := n.Info(context.Background(), "replication").Result()
			master := strings.Contains(repl, "role:master")
			if strings.Contains(info, "cluster_state:ok") && strings.Count(nodes, "connected") == len(c.Addrs) &&
				(!master || strings.Count(repl, "state=online") == c.replicas) {
				break
			}
			if time.Now().After(deadline) {
				n.Close()
				return fmt.Errorf("the cluster did not come up within 15s: %s", info)
			}
		}
		n.Close()
	}
	return nil
}

// Options are go-redis's options for a client of the cluster.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs}
}
