package metrics_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/metrics/metricstest"
)

func TestWriterAndHistogram(t *testing.T) {
	var w metrics.Writer
	w.Family("x_total", "counter", "Things, with a \\ and a\nnewline.")
	w.Sample("x_total", []metrics.Label{{Name: "route", Value: `/a\b"c"` + "\n"}, {Name: "status", Value: "200"}}, 3)
	w.Gauge("y", "A gauge.", 1.5)
	h := metrics.NewHistogram([]float64{0.001, 0.01})
	h.Observe(500 * time.Microsecond)
	h.Observe(time.Millisecond) // on a bound: counted in it (le is <=)
	h.Observe(5 * time.Millisecond)
	h.Observe(time.Second)
	w.Family("d_seconds", "histogram", "Durations.")
	h.Write(&w, "d_seconds", []metrics.Label{{Name: "route", Value: "/a"}})

	assert.Equal(t, `# HELP x_total Things, with a \\ and a\nnewline.
# TYPE x_total counter
x_total{route="/a\\b\"c\"\n",status="200"} 3
# HELP y A gauge.
# TYPE y gauge
y 1.5
# HELP d_seconds Durations.
# TYPE d_seconds histogram
d_seconds_bucket{route="/a",le="0.001"} 2
d_seconds_bucket{route="/a",le="0.01"} 3
d_seconds_bucket{route="/a",le="+Inf"} 4
d_seconds_sum{route="/a"} 1.0065
d_seconds_count{route="/a"} 4
`, string(w.Bytes()))

	families, err := metricstest.Parse(string(w.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, "/a\\b\"c\"\n", families["x_total"].Samples[0].Labels["route"], "escapes read back")
	assert.Len(t, families["d_seconds"].Samples, 5)
}

// Counts print as integers, as client_golang prints them (membership_members
// 1000000, never 1e+06).
func TestCountsPrintAsIntegers(t *testing.T) {
	for v, want := range map[float64]string{
		1e6:         "1000000",
		0:           "0",
		-3:          "-3",
		1<<53 - 1:   "9007199254740991",
		1e20:        "1e+20",
		0.25:        "0.25",
		1234567.5:   "1.2345675e+06",
		math.Inf(1): "+Inf",
	} {
		var w metrics.Writer
		w.Gauge("g", "A gauge.", v)
		assert.Equal(t, "# HELP g A gauge.\n# TYPE g gauge\ng "+want+"\n", string(w.Bytes()), "%v", v)
	}
}
