package httpapi

import (
	"net/http"
	"runtime"
	"strconv"

	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/membership"
)

// handleMetrics serves /metrics: the request metrics, the memory budgets,
// whether the store is writable, the goroutines, then what each collector
// writes (the store's figures). Every figure is kept as it changes, so a
// scrape costs the same whatever the store holds.
func handleMetrics(d shared) http.Handler {
	contentType := []string{metrics.ContentType}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.metrics == nil {
			middleware.WriteError(w, r, membership.Errorf(middleware.CodeNotFound, "metrics are turned off (-metrics=false)"))
			return
		}
		var mw metrics.Writer
		d.metrics.Write(&mw)
		mw.Budgets(d.budgets())
		writable := 1.0
		if d.loading() || d.store.Writable() != nil {
			writable = 0
		}
		mw.Gauge("membership_store_writable", "1 when the store takes changes, 0 when it cannot (a failed fsync, a stuck or full disk, a full queue); /readyz says why.", writable)
		mw.Gauge("membership_changes_waiters", "/changes long polls waiting now.", float64(d.waiters.n.Load()))
		mw.Gauge("membership_changes_waiters_limit", "The most /changes long polls that may wait at once (-max-waiters).", float64(d.waiters.limit))
		mw.Counter("membership_changes_waiters_refused_total", "/changes long polls answered at once because -max-waiters were waiting.", float64(d.waiters.refused.Load()))
		mw.Gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
		if d.store.Metrics != nil {
			d.store.Metrics(&mw)
		}
		for _, c := range d.opts.Collectors {
			c(&mw)
		}
		h := w.Header()
		h["Content-Type"] = contentType
		h["Content-Length"] = []string{strconv.Itoa(len(mw.Bytes()))}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(mw.Bytes())
	})
}
