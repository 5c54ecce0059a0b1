package middleware

import (
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/metrics"
)

// RequestMetrics counts requests by route, method and status, times them by
// route, and counts those in flight. Recording a request is a map lookup and
// a few atomic adds: no lock, no allocation.
type RequestMetrics struct {
	inFlight atomic.Int64
	// routes maps a mux pattern ("GET /healthz", "/", …) to the metrics of
	// its path: patterns of one path share them. It is filled before
	// serving (by the loading mux, whose patterns the loaded one repeats)
	// and only read after.
	routes map[string]*routeMetrics
	paths  []*routeMetrics // each path once, in order of registration
}

type routeMetrics struct {
	path     string // the route label: the pattern's path
	duration *metrics.Histogram
	// counts holds a counter per method and status, 100 to 999 (all that
	// net/http sends). Pages never counted in are never touched.
	counts [][statusSlots]atomic.Uint64 // by methodIndex
}

const (
	minStatus   = 100
	statusSlots = 900
)

// methods are the method label's values; any other method counts as
// "other", so that clients cannot make up new series.
var methods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "other"}

func methodIndex(m string) int {
	if i := slices.Index(methods[:len(methods)-1], m); i >= 0 {
		return i
	}
	return len(methods) - 1
}

func NewRequestMetrics() *RequestMetrics {
	return &RequestMetrics{routes: map[string]*routeMetrics{}}
}

// addPattern registers a mux pattern. A pattern registered already (the
// loading mux's, again for the loaded one) keeps its metrics, and the map is
// only read: requests are being counted.
func (m *RequestMetrics) AddPattern(pattern string) {
	if _, ok := m.routes[pattern]; ok {
		return
	}
	path := pattern
	if _, p, ok := strings.Cut(pattern, " "); ok {
		path = p
	}
	for _, rm := range m.paths {
		if rm.path == path {
			m.routes[pattern] = rm
			return
		}
	}
	rm := &routeMetrics{
		path:     path,
		duration: metrics.NewHistogram(metrics.DefaultDurationBuckets),
		counts:   make([][statusSlots]atomic.Uint64, len(methods)),
	}
	m.routes[pattern] = rm
	m.paths = append(m.paths, rm)
}

// record counts one request the mux routed to pattern.
func (m *RequestMetrics) record(pattern, method string, status int, elapsed time.Duration) {
	rm := m.routes[pattern]
	if rm == nil {
		rm = m.routes["/"] // the mux's own redirects, which have no pattern
	}
	rm.duration.Observe(elapsed)
	if i := status - minStatus; 0 <= i && i < statusSlots {
		rm.counts[methodIndex(method)][i].Add(1)
	}
}

// write writes the request families.
func (m *RequestMetrics) Write(w *metrics.Writer) {
	w.Family("membership_http_requests_total", "counter", "HTTP requests answered, by route (the path pattern; / for unknown paths), method and status.")
	for _, rm := range m.paths {
		for mi := range rm.counts {
			for i := range rm.counts[mi] {
				if n := rm.counts[mi][i].Load(); n > 0 {
					w.Sample("membership_http_requests_total", []metrics.Label{
						{Name: "route", Value: rm.path},
						{Name: "method", Value: methods[mi]},
						{Name: "status", Value: strconv.Itoa(minStatus + i)},
					}, float64(n))
				}
			}
		}
	}
	w.Family("membership_http_request_duration_seconds", "histogram", "Time to answer HTTP requests, by route (from the first byte of the request's header to the handler's return; /changes includes its long-poll wait).")
	for _, rm := range m.paths {
		rm.duration.Write(w, "membership_http_request_duration_seconds", []metrics.Label{{Name: "route", Value: rm.path}})
	}
	w.Gauge("membership_http_requests_in_flight", "HTTP requests being answered now, this scrape included.", float64(m.inFlight.Load()))
}
