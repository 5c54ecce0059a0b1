// Package metrics writes metrics in the Prometheus text exposition format
// (version 0.0.4), with the standard library alone: a Writer for families and
// samples, and a lock-free Histogram of durations.
package metrics

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// ContentType is the Content-Type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Label is one name="value" pair of a sample.
type Label struct {
	Name, Value string
}

// Writer accumulates an exposition. Write each family's header with Family,
// then its samples; a family's samples must follow its header.
type Writer struct {
	b []byte
}

// Bytes returns what was written.
func (w *Writer) Bytes() []byte { return w.b }

// Family writes the HELP and TYPE lines of a family; typ is counter, gauge
// or histogram.
func (w *Writer) Family(name, typ, help string) {
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = appendEscaped(w.b, help, false)
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, typ...)
	w.b = append(w.b, '\n')
}

// Sample writes one sample line.
func (w *Writer) Sample(name string, labels []Label, value float64) {
	w.b = append(w.b, name...)
	if len(labels) > 0 {
		w.b = append(w.b, '{')
		for i, l := range labels {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, l.Name...)
			w.b = append(w.b, `="`...)
			w.b = appendEscaped(w.b, l.Value, true)
			w.b = append(w.b, '"')
		}
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ' ')
	w.b = appendValue(w.b, value)
	w.b = append(w.b, '\n')
}

// Gauge writes a family of one unlabelled sample.
func (w *Writer) Gauge(name, help string, value float64) {
	w.Family(name, "gauge", help)
	w.Sample(name, nil, value)
}

// Counter writes a family of one unlabelled counter.
func (w *Writer) Counter(name, help string, value float64) {
	w.Family(name, "counter", help)
	w.Sample(name, nil, value)
}

// appendEscaped escapes \ and newlines, and " too in label values, as the
// format requires.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		// A count: as an integer, as client_golang prints it (1000000,
		// not 1e+06), exact up to 2^53.
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// DefaultDurationBuckets are the upper bounds, in seconds, of the request
// and fsync duration histograms: 100µs to 10s.
var DefaultDurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram counts durations into buckets. It is safe for concurrent use and
// takes no lock: an observation is two atomic adds.
type Histogram struct {
	bounds []time.Duration // upper bounds, ascending
	les    []string        // the bounds as le label values
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // nanoseconds
}

// NewHistogram returns a histogram with the given upper bounds, in seconds,
// ascending.
func NewHistogram(bounds []float64) *Histogram {
	h := &Histogram{counts: make([]atomic.Uint64, len(bounds)+1)}
	for _, s := range bounds {
		h.bounds = append(h.bounds, time.Duration(s*float64(time.Second)))
		h.les = append(h.les, strconv.FormatFloat(s, 'g', -1, 64))
	}
	h.les = append(h.les, "+Inf")
	return h
}

// Observe counts one duration.
func (h *Histogram) Observe(d time.Duration) {
	i := 0
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(max(d, 0)))
}

// Write writes the histogram's samples, name_bucket (cumulative, ending with
// le="+Inf"), name_sum in seconds and name_count, each with labels and le.
// Observations made while it runs may be partly counted; the buckets are
// still written cumulative and +Inf equal to _count.
func (h *Histogram) Write(w *Writer, name string, labels []Label) {
	ls := make([]Label, len(labels), len(labels)+1)
	copy(ls, labels)
	ls = append(ls, Label{Name: "le"})
	var cumulative uint64
	for i := range h.counts {
		cumulative += h.counts[i].Load()
		ls[len(ls)-1].Value = h.les[i]
		w.Sample(name+"_bucket", ls, float64(cumulative))
	}
	w.Sample(name+"_sum", labels, time.Duration(h.sum.Load()).Seconds())
	w.Sample(name+"_count", labels, float64(cumulative))
}

// Budget is what one memory budget reports: its name (the budget label),
// the bytes held now and its limit, and how many requests it refused (or, for
// a budget that drops rather than refuses, how many things it dropped).
type Budget struct {
	Name    string
	Used    int64
	Limit   int64
	Refused uint64
}

// Budgets writes the families of the memory budgets: bytes held, limits and
// refusals, one sample each per budget.
func (w *Writer) Budgets(bs []Budget) {
	w.Family("membership_memory_bytes", "gauge", "Memory held now by each budget, in bytes.")
	for _, b := range bs {
		w.Sample("membership_memory_bytes", []Label{{Name: "budget", Value: b.Name}}, float64(b.Used))
	}
	w.Family("membership_memory_limit_bytes", "gauge", "The limit of each memory budget, in bytes (set by flags).")
	for _, b := range bs {
		w.Sample("membership_memory_limit_bytes", []Label{{Name: "budget", Value: b.Name}}, float64(b.Limit))
	}
	w.Family("membership_memory_refused_total", "counter", "Requests refused (503) because a budget was spent; for changes_kept, changes dropped from the feed; for idempotency_keys, keys forgotten; for log_buffer, log lines dropped.")
	for _, b := range bs {
		w.Sample("membership_memory_refused_total", []Label{{Name: "budget", Value: b.Name}}, float64(b.Refused))
	}
}
