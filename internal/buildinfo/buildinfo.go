// Package buildinfo says which build of the service is running: its
// version, the commit it was built from and the Go that built it, for
// -version, the start log and /metrics.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and revision are stamped at link time by make build and the
// Dockerfiles, with -ldflags "-X example.com/groupmembership/internal/buildinfo.version=…":
// git describe --tags --always --dirty, and the commit. A plain go build
// leaves them empty, and the build information stands in.
var (
	version  string
	revision string
)

// Info is what identifies a build.
type Info struct {
	// Version is the version stamped at link time; else the main module's
	// version in the build information (v1.2.0 for go install of a tag; a
	// pseudo-version where go build read the commit from git); else
	// "(devel)".
	Version string
	// Revision is the commit stamped at link time; else the build
	// information's vcs.revision; else "unknown".
	Revision string
	// GoVersion is the Go release that built the binary.
	GoVersion string
}

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return fromBuild(version, revision, bi)
}

// fromBuild is Read with the values stamped at link time and the build
// information (nil: none) given.
func fromBuild(linkedVersion, linkedRevision string, bi *debug.BuildInfo) Info {
	info := Info{Version: linkedVersion, Revision: linkedRevision, GoVersion: runtime.Version()}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Revision == "" {
				info.Revision = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// Text is what -version prints for the program name.
func (i Info) Text(name string) string {
	return fmt.Sprintf("%s version: %s\nrevision: %s\ngo version: %s\n", name, i.Version, i.Revision, i.GoVersion)
}
