package products

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// Write is a whole Envoy bootstrap (envoy -c envoy.yaml) that keeps p: a
// listener on p.Listen whose HTTP connection manager runs the local rate
// limit filter, then the router to p.Backend, named once as the cluster
// app. Each rule is a rate_limits entry that makes a descriptor of the
// key and the rule's name (a generic_key), and a descriptor of that pair
// with the key's value left empty (a bucket per client); a tier's keys
// have descriptors with their value, matched before the wildcard, each
// rule paired with every key's rule of its place.
func (e Envoy) Write(p Policy) (string, error) {
	if len(p.Rules) == 0 {
		return "", fmt.Errorf("envoy: no rule to write")
	}
	for _, t := range p.Tiers {
		if len(t.Rules) != len(p.Rules) {
			return "", fmt.Errorf("envoy: the tier %s has %d rules where every key has %d: each tier's rule takes the place of one of every key's", t.Name, len(t.Rules), len(p.Rules))
		}
	}
	action, entry, note := envoyKeyOf(p.Key)
	var b strings.Builder
	for _, n := range append(p.Notes, note+".") {
		hashComment(&b, n)
	}
	listenHost, listenPort, err := hostPort(or(p.Listen, "127.0.0.1:8000"))
	if err != nil {
		return "", fmt.Errorf("envoy: --listen: %w", err)
	}
	backHost, backPort, err := hostPort(or(p.Backend, "127.0.0.1:8080"))
	if err != nil {
		return "", fmt.Errorf("envoy: --backend: %w", err)
	}
	names := make([]string, len(p.Rules))
	for i := range p.Rules {
		names[i] = zoneSuffix(p.Rules, i)
	}
	envoyHead(&b, listenHost, listenPort, max(20, 2*p.Clients))
	for _, name := range names {
		fmt.Fprintf(&b, "              - actions:\n                - %s\n                - generic_key: {descriptor_key: ratelab, descriptor_value: %s}\n", action, strconv.Quote(name))
	}
	b.WriteString("              descriptors:\n")
	descriptor := func(value, name string, r EnvoyRule) {
		v := ""
		if value != "" {
			v = ", value: " + strconv.Quote(value)
		}
		fmt.Fprintf(&b, "              - entries: [{key: %s%s}, {key: ratelab, value: %s}]\n", entry, v, strconv.Quote(name))
		fmt.Fprintf(&b, "                token_bucket: {max_tokens: %d, tokens_per_fill: %d, fill_interval: %s}\n", r.MaxTokens, r.TokensPerFill, protoDuration(r.FillInterval))
	}
	for i, r := range p.Rules {
		descriptor("", names[i], r.(EnvoyRule))
	}
	for _, t := range p.Tiers {
		fmt.Fprintf(&b, "              # The tier %s.\n", t.Name)
		for _, k := range t.Keys {
			for i, r := range t.Rules {
				descriptor(k, names[i], r.(EnvoyRule))
			}
		}
	}
	envoyTail(&b, backHost, backPort)
	return b.String(), nil
}

// envoyHead writes the bootstrap down to the local rate limit's
// rate_limits: the listener on host:port, the connection manager's
// route to the cluster app, the filter enforced on every request and
// keeping the buckets of as many clients as descriptors.
func envoyHead(b *strings.Builder, host, port string, descriptors int) {
	fmt.Fprintf(b, `
static_resources:
  listeners:
  - name: ratelab
    address:
      socket_address: {address: %s, port_value: %s}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ratelab
          route_config:
            virtual_hosts:
            - name: app
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: app}
          http_filters:
          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
              stat_prefix: ratelab
              filter_enabled:
                runtime_key: ratelab_enabled
                default_value: {numerator: 100, denominator: HUNDRED}
              filter_enforced:
                runtime_key: ratelab_enforced
                default_value: {numerator: 100, denominator: HUNDRED}
              max_dynamic_descriptors: %d
              rate_limits:
`, host, port, descriptors)
}

// envoyTail writes the router filter and the cluster app at host:port.
func envoyTail(b *strings.Builder, host, port string) {
	fmt.Fprintf(b, `          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: app
    type: STATIC
    load_assignment:
      cluster_name: app
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: {address: %s, port_value: %s}
`, host, port)
}

// envoyKeyOf is how Envoy's rate limit actions take the plan's key: the
// action, the descriptor entry's key it makes, and what a person must
// know.
func envoyKeyOf(key accesslog.KeySpec) (action, entry, note string) {
	switch {
	case key.Header != "":
		k := strings.ToLower(key.Header)
		return fmt.Sprintf("request_headers: {header_name: %s, descriptor_key: %s}", key.Header, k), k,
			"A request without the " + key.Header + " header makes no descriptor and is not limited"
	case key.Field == "":
		return "remote_address: {}", "remote_address", "The client's address is the downstream's as the connection manager trusts it (use_remote_address, xff_num_trusted_hops behind a proxy); Envoy 1.34 or later, for a bucket per client"
	default:
		return fmt.Sprintf("request_headers: {header_name: %s, descriptor_key: %s}", key.Field, strings.ToLower(key.Field)), strings.ToLower(key.Field),
			fmt.Sprintf("The log's field %s is the key, which Envoy does not see: these lines key on a request header of its name; put the action that yields it in its place", key.Field)
	}
}

// protoDuration is d as protobuf's JSON writes a Duration: "1s", "0.050s".
func protoDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// hostPort splits an address, its port a number.
func hostPort(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", fmt.Errorf("%s: the port is not a number", addr)
	}
	return host, port, nil
}
