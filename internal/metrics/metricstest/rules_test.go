package metricstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSelectorsReadsExpressions(t *testing.T) {
	tests := []struct {
		name, expr string
		want       []string
	}{
		{"comparison", `up{job=~"membership.*"} == 0`, []string{`up{job=~"membership.*"}`}},
		{"function and range", `increase(a_total{x="1",y!="2"}[5m]) > 0`, []string{`a_total{x="1",y!="2"}`}},
		{"ratio with ignoring", `rate(h_bucket{le="1"}[5m]) / ignoring(le) rate(h_count[5m]) < 0.99`, []string{`h_bucket{le="1"}`, `h_count`}},
		{"aggregation", `sum by (instance) (rate(a_total[1m])) > 1e3`, []string{`a_total`}},
		{"grouping after", `group without (le) (h_bucket)`, []string{`h_bucket`}},
		{"no selector", `vector(0) > 1`, nil},
		{"trailing comma", `a{x="1",}`, []string{`a{x="1"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sels, err := Selectors(tt.expr)
			require.NoError(t, err)
			var got []string
			for _, s := range sels {
				got = append(got, s.String())
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// What the reader does not understand is refused, not passed over.
func TestSelectorsRefusesWhatItDoesNotRead(t *testing.T) {
	for _, expr := range []string{
		`{__name__="a"}`,
		`a{x=1}`,
		`a{x="1"`,
		`label_replace(a, "b", "$1", "c", "(.*)")`,
		`rate(a[5m]`,
		`sum by x (a)`,
	} {
		_, err := Selectors(expr)
		assert.Error(t, err, expr)
	}
}

const exposition = `# TYPE a_total counter
a_total{budget="replies",status="200"} 1
a_total{budget="request_headers_admin",status="200"} 1
# TYPE h histogram
h_bucket{le="1"} 0
h_bucket{le="+Inf"} 0
h_sum 0
h_count 0
`

func TestSelectorCheck(t *testing.T) {
	families, err := Parse(exposition)
	require.NoError(t, err)
	tests := []struct {
		name, expr, wantErr string
	}{
		{"a counter", `a_total`, ""},
		{"a value", `a_total{budget="replies"}`, ""},
		{"alternatives", `a_total{budget=~"replies|request_headers.*"}`, ""},
		{"an open label's value", `a_total{status="500"}`, ""},
		{"a bucket's le", `h_bucket{le="1"}`, ""},
		{"a histogram's count", `h_count`, ""},
		{"no such metric", `b_total`, "no such metric"},
		{"not a histogram", `a_total_count`, "no such metric"},
		{"no such label", `a_total{route="/"}`, "has the label route"},
		{"no such value", `a_total{budget="commit_queue"}`, `matching "commit_queue"`},
		{"one alternative missing", `a_total{budget=~"replies|commit_queue"}`, `matching "commit_queue"`},
		{"no such bucket", `h_bucket{le="2"}`, `matching "2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sels, err := Selectors(tt.expr)
			require.NoError(t, err)
			require.Len(t, sels, 1)
			err = sels[0].Check(families, "status")
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

func TestReadRules(t *testing.T) {
	rules, err := ReadRules([]byte(`groups:
  - name: g
    rules:
      - alert: A
        expr: a_total > 0
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: s
`))
	require.NoError(t, err)
	assert.Equal(t, []Rule{{Alert: "A", Expr: "a_total > 0", For: "5m", Labels: map[string]string{"severity": "warning"}, Annotations: map[string]string{"summary": "s"}}}, rules)

	_, err = ReadRules([]byte("groups:\n  - name: g\n    rules:\n      - record: r\n        expr: a\n"))
	assert.Error(t, err, "a recording rule")
}
