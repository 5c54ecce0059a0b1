package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/metrics/metricstest"
)

// alertRules reads docs/alerts.yml.
func alertRules(t *testing.T) []metricstest.Rule {
	t.Helper()
	text, err := os.ReadFile("docs/alerts.yml")
	require.NoError(t, err)
	rules, err := metricstest.ReadRules(text)
	require.NoError(t, err)
	require.NotEmpty(t, rules)
	return rules
}

// notAlerted are the failure metrics, and the budgets, that no rule of
// docs/alerts.yml watches, and why.
var notAlerted = map[string]string{
	"membership_idempotency_keys_dropped_total": "counts the keys forgotten past -idempotency-retention, as they should be, with those forgotten early",
	"budget=idempotency_keys":                   "counts the keys forgotten past -idempotency-retention, as they should be, with those forgotten early",
	"budget=changes_kept":                       "drops the oldest change by design",
	"budget=list_cache":                         "drops the least recently read list by design, and counts nothing",
	"membership_tls_reload_failures_total": "MembershipTLSReloadFailed watches membership_tls_last_reload_successful, which a good load after a failed one " +
		"(a certificate written before its key) sets back",
	"membership_tls_handshake_failures_total": "clients cause them at any rate (scans, TCP checks, plain HTTP, a certificate a client does not trust); " +
		"one the service should not serve is MembershipTLSCertificateExpiring's",
}

// TestAlertRulesNameTheServicesMetrics holds docs/alerts.yml to the metrics
// the program serves, with a data directory and an admin listener: every
// metric a rule names, every label it matches on and every value it asks
// for (but a status's, which appears once counted), TLS's and the ACL
// file's included. So a renamed metric
// fails here rather than leave a rule that never fires. The other way, every
// failure the program counts is watched by a rule, or named in notAlerted.
// up is Prometheus's own; the shared log's lag, membership-postgres's, is
// checked by its tests.
func TestAlertRulesNameTheServicesMetrics(t *testing.T) {
	rules := alertRules(t)
	p := newServicePKI(t)
	acl := filepath.Join(p.dir, "acl")
	writeACL(t, acl, "dashboard dash-token read *")
	base, _, _ := startProgram(t, append(p.args(), "-data-dir", t.TempDir(), "-admin-addr", "127.0.0.1:0", "-acl-file", acl)...)
	status, _ := get(t, p.client(), httpsOf(base)+"/healthz") // a request counted, with its status
	require.Equal(t, http.StatusOK, status)
	status, body := get(t, p.client(), httpsOf(base)+"/metrics")
	require.Equal(t, http.StatusOK, status)
	families, err := metricstest.Parse(body)
	require.NoError(t, err)

	var selectors []metricstest.Selector
	for _, r := range rules {
		sels, err := metricstest.Selectors(r.Expr)
		require.NoError(t, err, r.Alert)
		require.NotEmpty(t, sels, "%s selects nothing", r.Alert)
		for _, s := range sels {
			selectors = append(selectors, s)
			if s.Name == "up" || strings.HasPrefix(s.Name, "membership_follow_") {
				continue
			}
			assert.NoError(t, s.Check(families, "status"), r.Alert)
		}
	}

	watched := func(sample metricstest.Sample) bool {
		return slices.ContainsFunc(selectors, func(s metricstest.Selector) bool { return s.Matches(sample) })
	}
	failure := regexp.MustCompile(`_(refused|failures|timeouts|dropped)_total$`)
	var failures []string
	for name, f := range families {
		if !failure.MatchString(name) && name != "membership_store_writable" {
			continue
		}
		failures = append(failures, name)
		for _, sample := range f.Samples {
			key := name
			if budget, ok := sample.Labels["budget"]; ok {
				key = "budget=" + budget
			}
			if _, ok := notAlerted[key]; !ok {
				assert.True(t, watched(sample), "no rule watches %s %v: add one to docs/alerts.yml, or say why not in notAlerted", sample.Name, sample.Labels)
			}
		}
	}
	assert.Subset(t, failures, []string{"membership_store_writable", "membership_memory_refused_total", "membership_commit_timeouts_total"},
		"the failure metrics were found")
}

// TestAlertRunbooks holds every rule of docs/alerts.yml to a severity, a
// summary and a runbook_url naming its entry, under Alerts in
// docs/operating.md, and holds that section to an entry per rule.
func TestAlertRunbooks(t *testing.T) {
	rules := alertRules(t)
	text, err := os.ReadFile("docs/operating.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(text), "\n## Alerts\n")
	require.True(t, ok, "docs/operating.md has an Alerts section")
	section, _, _ = strings.Cut(section, "\n## ")
	var entries []string
	for line := range strings.Lines(section) {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			entries = append(entries, strings.TrimSpace(name))
		}
	}
	var alerts []string
	for _, r := range rules {
		alerts = append(alerts, r.Alert)
		assert.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], r.Alert)
		assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
		assert.Equal(t, "docs/operating.md#"+strings.ToLower(r.Alert), r.Annotations["runbook_url"],
			"%s: its runbook_url, the anchor of its heading", r.Alert)
	}
	assert.Equal(t, alerts, entries, "an entry under Alerts in docs/operating.md for each rule, in the rules' order")
}

// TestAlertRuleTestsCatchBrokenRules runs docs/alerts_test.yml with promtool
// against broken copies of docs/alerts.yml. For each rule: one whose
// expression never fires; one whose fires for every series of the metric it
// names first; one that waits a minute less before it fires (or, for one
// that fires at once, 5 minutes more). Each must fail the rule's tests, or
// they do not test that it fires, that it does not fire for the series that
// come close, or how long it waits. It needs promtool, and runs under make
// alerts, which installs it and sets MEMBERSHIP_TEST_PROMTOOL=1 (make test
// runs make alerts).
func TestAlertRuleTestsCatchBrokenRules(t *testing.T) {
	if os.Getenv("MEMBERSHIP_TEST_PROMTOOL") == "" {
		t.Skip("runs under make alerts, which installs promtool (or set MEMBERSHIP_TEST_PROMTOOL=1)")
	}
	promtool, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool: make alerts installs it")
	text, err := os.ReadFile("docs/alerts.yml")
	require.NoError(t, err)
	tests, err := os.ReadFile("docs/alerts_test.yml")
	require.NoError(t, err)

	// runTests runs the tests against rules as the rule file, in a
	// directory of its own, and returns promtool's error and output.
	dir := t.TempDir()
	runTests := func(name, rules string) (string, error) {
		sub := filepath.Join(dir, name)
		if err := os.Mkdir(sub, 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(sub, "alerts.yml"), []byte(rules), 0o600); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(sub, "alerts_test.yml"), tests, 0o600); err != nil {
			return "", err
		}
		out, err := exec.Command(promtool, "test", "rules", filepath.Join(sub, "alerts_test.yml")).CombinedOutput()
		return string(out), err
	}
	out, err := runTests("unbroken", string(text))
	require.NoError(t, err, "the tests pass on docs/alerts.yml itself:\n%s", out)

	// promtool spends most of a run waiting, so the runs go side by side,
	// eight at a time.
	type run struct {
		alert, what, out string
		err              error
	}
	var runs []*run
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for _, r := range alertRules(t) {
		for _, b := range brokenRules(t, string(text), r) {
			ru := &run{alert: r.Alert, what: b.what}
			name := strconv.Itoa(len(runs))
			runs = append(runs, ru)
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				ru.out, ru.err = runTests(name, b.rules)
			})
		}
	}
	wg.Wait()
	for _, ru := range runs {
		assert.Error(t, ru.err, "%s: the tests pass with a rule that %s", ru.alert, ru.what)
		assert.Contains(t, ru.out, "alertname: "+ru.alert+",", "%s: the tests that fail with a rule that %s are its own", ru.alert, ru.what)
	}
}

// brokenRule is a copy of a rule file with one rule broken, and how.
type brokenRule struct{ what, rules string }

// brokenRules returns copies of text, the rule file, with r broken each way
// TestAlertRuleTestsCatchBrokenRules says.
func brokenRules(t *testing.T, text string, r metricstest.Rule) []brokenRule {
	t.Helper()
	start := strings.Index(text, "- alert: "+r.Alert+"\n")
	require.GreaterOrEqual(t, start, 0, "%s: its line", r.Alert)
	end := len(text)
	if next := strings.Index(text[start+1:], "- alert: "); next >= 0 {
		end = start + 1 + next
	}
	block := text[start:end]
	replace := func(old, new string) string {
		require.Equal(t, 1, strings.Count(block, old), "%s: %q once in its rule", r.Alert, old)
		return text[:start] + strings.Replace(block, old, new, 1) + text[end:]
	}

	sels, err := metricstest.Selectors(r.Expr)
	require.NoError(t, err, r.Alert)
	require.NotEmpty(t, sels, r.Alert)
	waits, err := time.ParseDuration(r.For)
	require.NoError(t, err, "%s: its for", r.Alert)
	shorter, what := waits-time.Minute, "waits a minute less"
	if waits == 0 {
		shorter, what = 5*time.Minute, "waits 5 minutes before it fires"
	}
	exprLine := "expr: " + r.Expr + "\n"
	return []brokenRule{
		{"never fires", replace(exprLine, "expr: vector(0) > 1\n")},
		{"fires for every series of " + sels[0].Name, replace(exprLine, "expr: group without (le) ("+sels[0].Name+")\n")},
		{what, replace("for: "+r.For+"\n", fmt.Sprintf("for: %dm\n", int(shorter.Minutes())))},
	}
}
