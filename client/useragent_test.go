package client_test

import (
	"net/http"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
)

// The default User-Agent names the client and the version of the module
// it was built from; WithUserAgent replaces it.
func TestUserAgentCarriesTheClientsVersion(t *testing.T) {
	svc := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 200, `[]`) })
	ft := newFakeTime()
	bi, ok := debug.ReadBuildInfo()
	require.True(t, ok, "a test binary has build information")
	want := client.UserAgentOf(bi)

	_, err := newClient(t, svc.URL, ft).GroupsPage(t.Context(), client.PageOptions{})
	require.NoError(t, err)
	_, err = newClient(t, svc.URL, ft, client.WithUserAgent("mine/2")).GroupsPage(t.Context(), client.PageOptions{})
	require.NoError(t, err)
	reqs := svc.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, want, reqs[0].Header.Get("User-Agent"))
	assert.Equal(t, "mine/2", reqs[1].Header.Get("User-Agent"))
}

// The version is the client's module's, wherever it is in the build: the
// main module, a dependency, a replaced one; a version that is no HTTP
// token ("(devel)") is "devel".
func TestUserAgentOf(t *testing.T) {
	const path = "example.com/groupmembership"
	dep := func(version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"a dependency at a tag", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v3.0.0"},
			Deps: []*debug.Module{{Path: "golang.org/x/text", Version: "v0.41.0"}, dep("v1.2.0", nil)}},
			"groupmembership-go-client/v1.2.0"},
		{"a dependency at a pseudo-version", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep("v0.0.0-20261129044553-58618ed91601", nil)}},
			"groupmembership-go-client/v0.0.0-20261129044553-58618ed91601"},
		{"a dependency replaced by another version", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep("v1.2.0", &debug.Module{Path: "example.com/fork", Version: "v1.2.1"})}},
			"groupmembership-go-client/v1.2.1"},
		{"a dependency replaced by a directory", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{dep("v0.0.0", &debug.Module{Path: "../"})}},
			"groupmembership-go-client/v0.0.0"},
		{"the main module, built in its checkout", &debug.BuildInfo{Main: debug.Module{Path: path, Version: "v0.0.0-20261129044553-58618ed91601+dirty"}},
			"groupmembership-go-client/v0.0.0-20261129044553-58618ed91601+dirty"},
		{"the main module, no version", &debug.BuildInfo{Main: debug.Module{Path: path, Version: "(devel)"}},
			"groupmembership-go-client/devel"},
		{"no build information", nil, "groupmembership-go-client/devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, client.UserAgentOf(tt.bi))
		})
	}
}
