package httplimit

import "fmt"

// settings are what the options set that a Middleware keeps as set.
type settings struct {
	key            KeyFunc
	cost           CostFunc
	headers        Headers
	shadow         bool
	serveUnmetered bool
	hooks          Hooks
	// settleFrom, when set, is the response field the actual cost is
	// read from (WithSettle).
	settleFrom string
}

// config is what the options set.
type config struct {
	settings
	err error // the first option that failed
}

// An Option configures a Middleware.
type Option func(*config)

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithKey keys requests by f. The default is ClientIP(IPConfig{}): the
// direct peer's address, IPv6 grouped by /64, no proxy trusted.
func WithKey(f KeyFunc) Option {
	var err error
	if f == nil {
		err = fmt.Errorf("httplimit: WithKey(nil)")
	}
	return keyOption(f, err)
}

// WithHeaderKey keys requests by the header called name (see HeaderKey).
func WithHeaderKey(name string) Option { return keyOption(HeaderKey(name)) }

// WithClientIP keys requests by the client's address (see ClientIP).
func WithClientIP(ip IPConfig) Option { return keyOption(ClientIP(ip)) }

// keyOption sets the key function k, or fails New with err.
func keyOption(k KeyFunc, err error) Option {
	return func(c *config) {
		if err != nil {
			c.fail(err)
		}
		c.key = k
	}
}

// WithCost prices requests by f; the default costs every request 1.
func WithCost(f CostFunc) Option { return func(c *config) { c.cost = f } }

// WithHeaders chooses the rate-limit header fields sent; the default is
// AllHeaders.
func WithHeaders(h Headers) Option { return func(c *config) { c.headers = h } }

// WithShadow turns on shadow (dry-run) mode: every request is decided and
// its headers sent, and none is denied, not even by the limiter's failure
// policy; Stats counts those that would have been denied.
func WithShadow() Option { return func(c *config) { c.shadow = true } }

// WithUnmetered serves requests the middleware cannot meter, those
// without a key or with a malformed cost, unmetered, rather than answer
// them 400 Bad Request, the default: serving them lets any client skip
// the limit by leaving out its key. The Error hook hears them either way.
func WithUnmetered() Option { return func(c *config) { c.serveUnmetered = true } }

// WithHooks sets the hooks.
func WithHooks(h Hooks) Option { return func(c *config) { c.hooks = h } }
