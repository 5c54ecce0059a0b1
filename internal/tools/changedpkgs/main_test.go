package main

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
)

func TestPackagesOfChangedFiles(t *testing.T) {
	fsys := fstest.MapFS{
		"go.mod":                             {},
		"main.go":                            {},
		"README.md":                          {},
		"docs/reference.md":                  {},
		"httpapi/handlers.go":                {},
		"httpapi/openapi.json":               {},
		"internal/store/wal/wal_test.go":     {},
		"internal/store/wal/testdata/x.log":  {},
		"internal/tools/x/testdata/src/a.go": {},
		"internal/tools/x/main.go":           {},
		"internal/.hidden/a.go":              {},
		"postgres/go.mod":                    {},
		"postgres/store.go":                  {},
		"postgres/migrations/001.sql":        {},
		"postgres/cmd/serve/main.go":         {},
		"bench/go.mod":                       {},
		"bench/main.go":                      {},
	}
	tests := []struct {
		name   string
		files  []string
		module string
		want   []string
	}{
		{"a package's file", []string{"httpapi/handlers.go"}, ".", []string{"./httpapi"}},
		{"a file beside the code", []string{"httpapi/openapi.json"}, ".", []string{"./httpapi"}},
		{"testdata", []string{"internal/store/wal/testdata/x.log", "internal/tools/x/testdata/src/a.go"}, ".", []string{"./internal/store/wal", "./internal/tools/x"}},
		{"a document", []string{"README.md", "docs/reference.md"}, ".", []string{"."}},
		{"a folder the go command ignores", []string{"internal/.hidden/a.go"}, ".", []string{"."}},
		{"a file deleted with its folder", []string{"internal/gone/gone.go"}, ".", []string{"."}},
		{"sorted, once each", []string{"main.go", "httpapi/handlers.go", "README.md"}, ".", []string{".", "./httpapi"}},
		{"another module's files are left out", []string{"postgres/store.go", "bench/main.go"}, ".", nil},
		{"postgres", []string{"postgres/migrations/001.sql", "postgres/cmd/serve/main.go", "main.go"}, "postgres", []string{".", "./cmd/serve"}},
		{"bench", []string{"bench/main.go", "main.go"}, "bench", []string{"."}},
		{"nothing changed", nil, ".", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, packages(fsys, tt.files, tt.module))
		})
	}
}
