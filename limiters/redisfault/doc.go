// Package redisfault starts real Redis servers of the caller's own and
// takes them away as production does: a TCP proxy in front of a server
// that refuses, drops, stalls or resets what it relays (Proxy), single
// servers that can be killed and restarted (Servers), a primary watched by
// Sentinels that promote its replica when it dies (Sentinel), and a
// Cluster. The library's failover tests and the lab's outage mode use it;
// it does not import testing, so a command can link it.
//
// It needs redis-server installed (Debian: apt-get install redis-server).
package redisfault
