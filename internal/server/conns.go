package server

import (
	"fmt"
	"log/slog"
	"net"

	"example.com/groupmembership/internal/connlimit"
	"example.com/groupmembership/internal/fdlimit"
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store/durable"
)

// The connection budget. Every connection holds a descriptor, and memory:
// about 21 KiB of the process's RSS when idle after a request (net/http's
// reader and writer buffers, its goroutine's stack), so that
// defaultMaxConns of them hold about 170 MiB. The descriptors the service
// needs for itself are kept aside, so that accepting a connection never
// fails for want of one, nor does a write to the data directory.
const (
	// defaultMaxConns caps the default of -max-conns for memory's sake,
	// whatever the descriptor limit allows.
	defaultMaxConns = 8192
	// minMaxConns is the fewest connections the service starts with.
	minMaxConns = 16
	// adminMaxConns is the admin listener's connection budget: probes and
	// scrapes, a few at a time.
	adminMaxConns = 16
	// ownDescriptors are the process's own: stdin, stdout and stderr, the
	// network poller and its wakeup, the listeners, and room to spare.
	ownDescriptors = 16
	// defaultHeaderMemory is the default of -header-memory: 256 requests'
	// headers of the largest size -max-header allows by default, each byte
	// costing two.
	defaultHeaderMemory = 32 << 20
)

// connPlan is how the descriptors are shared out.
type connPlan struct {
	limit    fdlimit.Limit
	reserved int // kept aside from the connections
	maxConns int
}

// planConns raises the descriptor limit where it can and shares it out: the
// descriptors the service keeps for itself, then the connections. It
// returns an error that names the way forward when the limit leaves too few
// for connections, or fewer than -max-conns asks.
func planConns(cfg Config, backend *Backend) (connPlan, error) {
	lim, err := fdlimit.Raise()
	if err != nil {
		return connPlan{}, fmt.Errorf("reading the limit of open descriptors: %w", err)
	}
	p := connPlan{limit: lim, reserved: reservedDescriptors(cfg, backend), maxConns: cfg.maxConns}
	if !lim.Known {
		if p.maxConns == 0 {
			p.maxConns = defaultMaxConns
		}
		return p, nil
	}
	room := int(min(lim.Soft, uint64(1<<31))) - p.reserved
	switch {
	case p.maxConns == 0 && room < minMaxConns:
		return p, fmt.Errorf("the limit of open descriptors is %d (ulimit -n): the service keeps %d for itself and needs %d more at least for connections; "+
			"raise the limit (ulimit -n, or docker run --ulimit nofile=N)", lim.Soft, p.reserved, minMaxConns)
	case p.maxConns == 0:
		p.maxConns = min(room, defaultMaxConns)
	case p.maxConns > room:
		return p, fmt.Errorf("-max-conns %d needs %d descriptors with the %d the service keeps for itself, over the limit of open descriptors, %d (ulimit -n): "+
			"lower -max-conns to %d at most, or raise the limit", p.maxConns, p.maxConns+p.reserved, p.reserved, lim.Soft, max(room, 0))
	}
	return p, nil
}

// reservedDescriptors counts what the service keeps aside from -max-conns:
// its own, the data directory's or the backend's store's, the connections
// the API listener is closing or refusing, and the admin listener's.
func reservedDescriptors(cfg Config, backend *Backend) int {
	perListener := connlimit.MaxClosing + connlimit.MaxRefusing + 1
	n := ownDescriptors + perListener
	if cfg.dataDir != "" {
		n += durable.MaxOpenFiles
	}
	if backend != nil {
		n += backend.Descriptors
	}
	if cfg.adminAddr != "" {
		n += adminMaxConns + perListener
	}
	return n
}

// log says how the descriptors are shared out.
func (p connPlan) log(logger *slog.Logger) {
	args := []any{"max_conns", p.maxConns, "reserved_descriptors", p.reserved}
	if p.limit.Known {
		args = append(args, "descriptor_limit", p.limit.Soft)
	}
	logger.Info("connection budget", args...)
}

// connMetrics writes each listener's connections: open, the limit, those
// refused and those closed to make room.
func connMetrics(w *metrics.Writer, lns []*connlimit.Listener, names []string) {
	families := []struct {
		name, typ, help string
		value           func(connlimit.Stats) float64
	}{
		{"membership_connections", "gauge", "Client connections open now.", func(s connlimit.Stats) float64 { return float64(s.Open) }},
		{"membership_connections_limit", "gauge", "The most client connections open at once (-max-conns).", func(s connlimit.Stats) float64 { return float64(s.MaxConns) }},
		{"membership_connections_refused_total", "counter", "Connections answered 503 because the budget was spent and none was idle.",
			func(s connlimit.Stats) float64 { return float64(s.Refused) }},
		{"membership_connections_closed_idle_total", "counter", "Idle connections closed to make room for new ones.",
			func(s connlimit.Stats) float64 { return float64(s.Evicted) }},
	}
	stats := make([]connlimit.Stats, len(lns))
	for i, ln := range lns {
		stats[i] = ln.Stats()
	}
	for _, f := range families {
		w.Family(f.name, f.typ, f.help)
		for i, s := range stats {
			w.Sample(f.name, []metrics.Label{{Name: "listener", Value: names[i]}}, f.value(s))
		}
	}
}

// headerBudgets reports each listener's budget of the headers being read.
func headerBudgets(lns []*connlimit.Listener, names []string) []metrics.Budget {
	bs := make([]metrics.Budget, len(lns))
	for i, ln := range lns {
		s := ln.Stats()
		name := "request_headers"
		if names[i] != "api" {
			name += "_" + names[i]
		}
		bs[i] = metrics.Budget{Name: name, Used: s.HeaderBytes, Limit: s.HeaderLimit, Refused: s.HeadersRefused}
	}
	return bs
}

// probeURL is the URL -probe asks when it is given a path: the admin
// listener's when there is one, else the API's, on this machine; https
// with -tls-cert.
func probeURL(cfg Config, path string) string {
	addr := cfg.addr
	if cfg.adminAddr != "" {
		addr = cfg.adminAddr
	}
	scheme := "http://"
	if cfg.tlsCert != "" {
		scheme = "https://"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + addr + path
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return scheme + net.JoinHostPort(host, port) + path
}
