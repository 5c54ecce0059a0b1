package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/metrics/metricstest"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// sample returns the value of the sample of family f with exactly labels,
// and whether there is one.
func sample(f *metricstest.Family, name string, labels map[string]string) (float64, bool) {
	for _, s := range f.Samples {
		if s.Name != name || len(s.Labels) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			if s.Labels[k] != v {
				match = false
			}
		}
		if match {
			return s.Value, true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	st := memory.New()
	h := httpapi.NewLoadingHandler(httpapi.Options{})
	h.Load(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.StoreExtras{Metrics: st.WriteMetrics, Budgets: st.Budgets})
	requests := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/group-user/a", "users=[1,2,3]", 200},
		{"POST", "/group-user/b", "users=[3,4]", 200},
		{"POST", "/group-user/b", "users=[x]", 400},
		{"DELETE", "/group-user/b", "users=[4]", 200},
		{"GET", "/group-user/a", "", 200},
		{"GET", "/group-user/a", "", 200},
		{"HEAD", "/group-user/a", "", 200},
		{"PATCH", "/group-user/a", "", 405},
		{"FOO", "/group-user/a", "", 405},
		{"PUT", "/group-user/c", "users=[5,6]", 200},
		{"GET", "/groups", "", 200},
		{"GET", "/groups?limit=0", "", 400},
		{"DELETE", "/groups/c", "", 200},
		{"GET", "/groups/c", "", 405},
		{"DELETE", "/user-group/3", "", 200},
		{"GET", "/group-user/a/9", "", 404},
		{"GET", "/nowhere", "", 404},
		{"GET", "/changes?after=0", "", 200},
	}
	for _, r := range requests {
		w := do(h, r.method, r.path, r.body, formType)
		require.Equal(t, r.status, w.Code, "%s %s: %s", r.method, r.path, w.Body.String())
	}

	w := do(h, "GET", "/metrics", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8", w.Header().Get("Content-Type"))
	families, err := metricstest.Parse(w.Body.String())
	require.NoError(t, err, "the whole exposition must check out:\n%s", w.Body.String())

	reqs := families["membership_http_requests_total"]
	require.NotNil(t, reqs)
	assert.Equal(t, "counter", reqs.Type)
	for _, tt := range []struct {
		route, method, status string
		want                  float64
	}{
		{"/group-user/{groupID}", "POST", "200", 2},
		{"/group-user/{groupID}", "POST", "400", 1},
		{"/group-user/{groupID}", "DELETE", "200", 1},
		{"/group-user/{groupID}", "GET", "200", 2},
		{"/group-user/{groupID}", "HEAD", "200", 1},
		{"/group-user/{groupID}", "PATCH", "405", 1},
		{"/group-user/{groupID}", "PUT", "200", 1},
		{"/groups", "GET", "200", 1},
		{"/groups", "GET", "400", 1},
		{"/groups/{groupID}", "DELETE", "200", 1},
		{"/groups/{groupID}", "GET", "405", 1},
		{"/user-group/{uid}", "DELETE", "200", 1},
		{"/group-user/{groupID}", "other", "405", 1}, // unknown methods make no new series
		{"/group-user/{groupID}/{uid}", "GET", "404", 1},
		{"/", "GET", "404", 1},
		{"/changes", "GET", "200", 1},
	} {
		got, ok := sample(reqs, "membership_http_requests_total", map[string]string{"route": tt.route, "method": tt.method, "status": tt.status})
		assert.True(t, ok, "%+v", tt)
		assert.Equal(t, tt.want, got, "%+v", tt)
	}
	total := 0.0
	for _, s := range reqs.Samples {
		total += s.Value
	}
	assert.Equal(t, float64(len(requests)), total, "every request counted once; the scrape counts after it answers")

	durations := families["membership_http_request_duration_seconds"]
	require.NotNil(t, durations)
	assert.Equal(t, "histogram", durations.Type)
	n, ok := sample(durations, "membership_http_request_duration_seconds_count", map[string]string{"route": "/group-user/{groupID}"})
	require.True(t, ok)
	assert.Equal(t, 10.0, n, "one histogram per route, over all its methods")
	_, ok = sample(durations, "membership_http_request_duration_seconds_bucket", map[string]string{"route": "/changes", "le": "+Inf"})
	assert.True(t, ok)

	inFlight, _ := sample(families["membership_http_requests_in_flight"], "membership_http_requests_in_flight", nil)
	assert.Equal(t, 1.0, inFlight, "the scrape itself")

	for name, want := range map[string]float64{
		"membership_groups":       1, // a {1,2}: b lost 3, c was deleted
		"membership_members":      2,
		"membership_users":        2,
		"membership_revision":     6,
		"membership_changes_kept": 6,
	} {
		f := families[name]
		require.NotNil(t, f, name)
		assert.Equal(t, "gauge", f.Type, name)
		got, _ := sample(f, name, nil)
		assert.Equal(t, want, got, name)
	}

	w = do(h, "GET", "/metrics", "", "")
	families, err = metricstest.Parse(w.Body.String())
	require.NoError(t, err)
	got, _ := sample(families["membership_http_requests_total"], "membership_http_requests_total", map[string]string{"route": "/metrics", "method": "GET", "status": "200"})
	assert.Equal(t, 1.0, got, "the first scrape is counted by the second")
}

func TestMetricsOff(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{NoMetrics: true})
	w := do(h, "GET", "/metrics", "", "")
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.True(t, strings.Contains(w.Body.String(), `"code":"not_found"`), w.Body.String())
}
