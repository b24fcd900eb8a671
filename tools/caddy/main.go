// Command caddy is Caddy with the rate_limit handler of
// github.com/mholt/caddy-ratelimit, built for make test-clocked (which
// runs the plan's Caddyfile in it): Caddy's own command, its standard
// modules, and the plugin, the versions go.mod pins.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mholt/caddy-ratelimit"
)

func main() {
	caddycmd.Main()
}
