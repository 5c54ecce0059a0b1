//go:build !(linux && (amd64 || arm64))

package aiofsync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenIsUnsupported: where there is no asynchronous fsync, Open says
// so and the caller keeps its file.
func TestOpenIsUnsupported(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	a, err := Open(f)
	assert.Nil(t, a)
	assert.ErrorIs(t, err, ErrUnsupported)
	assert.NoError(t, f.Sync(), "the file is still the caller's")
}
