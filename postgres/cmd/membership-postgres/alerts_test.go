package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/metrics/metricstest"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// TestAlertRulesNameTheFollowerMetrics holds the rules of docs/alerts.yml
// on the shared log's lag, which the root package's test leaves to this
// one, to what an instance serves: every metric, label and value they use.
func TestAlertRulesNameTheFollowerMetrics(t *testing.T) {
	text, err := os.ReadFile("../../../docs/alerts.yml")
	require.NoError(t, err)
	rules, err := metricstest.ReadRules(text)
	require.NoError(t, err)

	p := start(t, pgtest.NewDatabase(t))
	resp, err := client.Get(p.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	families, err := metricstest.Parse(string(body))
	require.NoError(t, err)

	checked := 0
	for _, r := range rules {
		sels, err := metricstest.Selectors(r.Expr)
		require.NoError(t, err, r.Alert)
		for _, s := range sels {
			if strings.HasPrefix(s.Name, "membership_follow_") {
				assert.NoError(t, s.Check(families), r.Alert)
				checked++
			}
		}
	}
	assert.NotZero(t, checked, "a rule on membership_follow_lag_seconds")
}
