package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheBinaryHasNoClientCode holds the service's binary free of the
// client and of membershiptest: they are for the programs that use the
// service, and for their tests.
func TestTheBinaryHasNoClientCode(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "go list -deps .: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "example.com/groupmembership/httpapi", "go list -deps . lists the binary's packages")
	for _, dep := range deps {
		assert.NotContains(t, []string{"example.com/groupmembership/client", "example.com/groupmembership/membershiptest"}, dep,
			"the binary imports %s", dep)
	}
}

// TestTheClientIsStandardLibraryOnly holds the client package to the
// standard library: a program that imports it takes no dependency.
func TestTheClientIsStandardLibraryOnly(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./client").CombinedOutput()
	require.NoError(t, err, "go list -deps ./client: %s", out)
	assert.Equal(t, []string{"example.com/groupmembership/client"}, strings.Fields(string(out)))
}

// TestTheLogImportsNoStore holds the log (internal/store/wal, and the
// records it holds) below the stores: the durable store calls the log and
// applies what it replays to memory; the log knows neither.
func TestTheLogImportsNoStore(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "./internal/store/wal/...").CombinedOutput()
	require.NoError(t, err, "go list -deps ./internal/store/wal/...: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "example.com/groupmembership/internal/store/wal/record", "go list -deps lists the log's packages")
	for _, dep := range deps {
		assert.NotContains(t, []string{"example.com/groupmembership/internal/store/durable", "example.com/groupmembership/internal/store/memory"}, dep,
			"the log imports %s", dep)
	}
}

// TestTheInMemoryStoresPartsImportOneWay holds the parts of the in-memory
// store to the order its package doc lists them in: each imports only
// parts listed after it, and none imports the Store.
func TestTheInMemoryStoresPartsImportOneWay(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	const memory = "example.com/groupmembership/internal/store/memory"
	parts := []string{"transitive", "expiring", "batch", "directory", "nesting", "group", "reverse", "packed", "expiry", "sortedset", "nicknames", "accounts", "feed", "keys", "shards"}
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./internal/store/memory/...").CombinedOutput()
	require.NoError(t, err, "go list ./internal/store/memory/...: %s", out)
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if fields[0] == memory {
			continue
		}
		part := strings.TrimPrefix(fields[0], memory+"/")
		listed = append(listed, part)
		i := slices.Index(parts, part)
		require.GreaterOrEqual(t, i, 0, "%s is not in the parts' order: add it to memory's doc and here", part)
		for _, imp := range fields[1:] {
			assert.NotEqual(t, memory, imp, "%s imports the Store", part)
			if other, ok := strings.CutPrefix(imp, memory+"/"); ok {
				assert.Greater(t, slices.Index(parts, other), i, "%s imports %s, listed before it", part, other)
			}
		}
	}
	assert.ElementsMatch(t, parts, listed)
}

// TestTheHTTPAPIsPartsImportOneWay holds the parts of the HTTP layer
// (httpapi's sub-packages) to one order: each imports only parts listed
// after it, and none imports httpapi, which holds the routes and handlers.
func TestTheHTTPAPIsPartsImportOneWay(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	const httpapi = "example.com/groupmembership/httpapi"
	parts := []string{"scim/scimtest", "scim", "scim/wire", "decode", "middleware", "lists", "encode"}
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./httpapi/...").CombinedOutput()
	require.NoError(t, err, "go list ./httpapi/...: %s", out)
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if fields[0] == httpapi {
			continue
		}
		part := strings.TrimPrefix(fields[0], httpapi+"/")
		listed = append(listed, part)
		i := slices.Index(parts, part)
		require.GreaterOrEqual(t, i, 0, "%s is not in the parts' order: add it here", part)
		for _, imp := range fields[1:] {
			assert.NotEqual(t, httpapi, imp, "%s imports httpapi", part)
			if other, ok := strings.CutPrefix(imp, httpapi+"/"); ok {
				assert.Greater(t, slices.Index(parts, other), i, "%s imports %s, listed before it", part, other)
			}
		}
	}
	assert.ElementsMatch(t, parts, listed)
}

// TestTheDomainsPartsImportOneWay holds the domain (membership and its
// sub-packages) to one order: each imports only parts listed after it, and
// no package of the service outside the domain. The Services above
// membership (nestreads, directory) import it; membership imports only the
// parts below it.
func TestTheDomainsPartsImportOneWay(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	const module, domain = "example.com/groupmembership/", "example.com/groupmembership/membership"
	parts := []string{"nestreads", "directory", "", "account", "scope", "groupids", "fingerprint"} // "": membership itself
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./membership/...").CombinedOutput()
	require.NoError(t, err, "go list ./membership/...: %s", out)
	part := func(path string) (string, bool) {
		if path == domain {
			return "", true
		}
		return strings.CutPrefix(path, domain+"/")
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		name, _ := part(fields[0])
		listed = append(listed, name)
		i := slices.Index(parts, name)
		require.GreaterOrEqual(t, i, 0, "%s is not in the parts' order: add it here", fields[0])
		for _, imp := range fields[1:] {
			other, ok := part(imp)
			if !ok {
				assert.False(t, strings.HasPrefix(imp, module), "%s imports %s, outside the domain", fields[0], imp)
				continue
			}
			assert.Greater(t, slices.Index(parts, other), i, "%s imports %s, listed before it", fields[0], imp)
		}
	}
	assert.ElementsMatch(t, parts, listed)
}
