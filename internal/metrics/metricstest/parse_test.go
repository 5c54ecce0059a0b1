package metricstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const good = `# HELP a_total A.
# TYPE a_total counter
a_total{x="1"} 2
a_total{x="2",} 3 1700000000000
# TYPE h histogram
h_bucket{le="0.1"} 1
h_bucket{le="+Inf"} 2
h_sum 0.3
h_count 2
`

func TestParseAcceptsTheFormat(t *testing.T) {
	families, err := Parse(good)
	require.NoError(t, err)
	assert.Equal(t, "counter", families["a_total"].Type)
	assert.Equal(t, "A.", families["a_total"].Help)
	assert.Len(t, families["a_total"].Samples, 2)
	assert.Len(t, families["h"].Samples, 4)
}

// Each of these breaks one rule; a checker that let any through would not
// be checking it.
func TestParseRefusesWhatBreaksTheFormat(t *testing.T) {
	tests := map[string]string{
		"empty":                      "",
		"no final newline":           "# TYPE a gauge\na 1",
		"blank line is not a sample": "# TYPE a gauge\n\na 1\n",
		"sample before TYPE":         "a 1\n# TYPE a gauge\n",
		"no TYPE at all":             "# HELP a A.\n",
		"unknown type":               "# TYPE a meter\na 1\n",
		"two TYPEs":                  "# TYPE a gauge\n# TYPE a gauge\na 1\n",
		"bad metric name":            "# TYPE 1a gauge\n1a 1\n",
		"bad label name":             "# TYPE a gauge\na{1x=\"v\"} 1\n",
		"unquoted label value":       "# TYPE a gauge\na{x=v} 1\n",
		"bad escape in label":        "# TYPE a gauge\na{x=\"\\t\"} 1\n",
		"raw quote in label":         "# TYPE a gauge\na{x=\"a\"b\"} 1\n",
		"bad escape in HELP":         "# HELP a a\\tb\n# TYPE a gauge\na 1\n",
		"labels without comma":       "# TYPE a gauge\na{x=\"1\" y=\"2\"} 1\n",
		"bad value":                  "# TYPE a gauge\na one\n",
		"hex value":                  "# TYPE a gauge\na 0x10\n",
		"series twice":               "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
		"family split":               "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# HELP a again\n",
		"negative counter":           "# TYPE a_total counter\na_total -1\n",
		"sample of another family":   "# TYPE a gauge\nb 1\n",
		"histogram not cumulative":   "# TYPE h histogram\nh_bucket{le=\"0.1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"histogram without +Inf":     "# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_sum 1\nh_count 1\n",
		"histogram count differs":    "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
		"histogram without _sum":     "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",
		"histogram le descending":    "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(text)
			assert.Error(t, err)
		})
	}
}
