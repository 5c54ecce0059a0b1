package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The version and revision stamped at link time win; without them, the
// build information's; without that, (devel) and unknown.
func TestFromBuild(t *testing.T) {
	vcs := func(version string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "example.com/groupmembership", Version: version}, Settings: settings}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}
	tests := []struct {
		name              string
		version, revision string
		bi                *debug.BuildInfo
		want              Info
	}{
		{"stamped at link time", "v1.2.0-3-g0123456-dirty", "fedcba9876543210fedcba9876543210fedcba98", vcs("(devel)", rev),
			Info{Version: "v1.2.0-3-g0123456-dirty", Revision: "fedcba9876543210fedcba9876543210fedcba98", GoVersion: "go1.99.1"}},
		{"go install of a tagged version", "", "", vcs("v1.2.0"),
			Info{Version: "v1.2.0", Revision: "unknown", GoVersion: "go1.99.1"}},
		{"go build in a git checkout", "", "", vcs("v0.0.0-20261129044553-0123456789ab+dirty", rev),
			Info{Version: "v0.0.0-20261129044553-0123456789ab+dirty", Revision: rev.Value, GoVersion: "go1.99.1"}},
		{"go build without VCS information", "", "", vcs("(devel)"),
			Info{Version: "(devel)", Revision: "unknown", GoVersion: "go1.99.1"}},
		{"a version stamped, the revision from VCS", "v1.3.0", "", vcs("(devel)", rev),
			Info{Version: "v1.3.0", Revision: rev.Value, GoVersion: "go1.99.1"}},
		{"no build information", "", "", nil,
			Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fromBuild(tt.version, tt.revision, tt.bi))
		})
	}
}

// The text of -version names the program and the three.
func TestInfoString(t *testing.T) {
	info := Info{Version: "v1.2.0", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.99.1"}
	assert.Equal(t, "membership version: v1.2.0\nrevision: 0123456789abcdef0123456789abcdef01234567\ngo version: go1.99.1\n", info.Text("membership"))
}
