package snap

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var snapshots []uint64
	for _, e := range entries {
		if name := e.Name(); IsFileName(name) {
			if n, err := strconv.ParseUint(name[9:len(name)-5], 10, 64); err == nil {
				snapshots = append(snapshots, n)
			}
		}
	}
	slices.Sort(snapshots)
	return snapshots, nil
}
