package snap

import (
	"fmt"
	"path/filepath"
	"strings"

	"example.com/groupmembership/internal/fileutil"
)

// FileName returns the name of snapshot seq in a data directory: the
// state as of the start of log seq.
func FileName(seq uint64) string {
	return fmt.Sprintf("snapshot-%016d.snap", seq)
}

// Path returns the path of snapshot seq in the directory dir.
func Path(dir string, seq uint64) string {
	return filepath.Join(dir, FileName(seq))
}

// IsFileName says whether name is the name of a snapshot.
func IsFileName(name string) bool {
	return strings.HasPrefix(name, "snapshot-") && strings.HasSuffix(name, ".snap")
}

// List returns the sequence numbers of the snapshots in dir, in ascending
// order.
func List(dir string) ([]uint64, error) {
	return fileutil.ListNumbered(dir, "snapshot-", ".snap")
}
