package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"example.com/groupmembership/internal/fileutil"
)

// Path returns the path of log seq in the directory dir.
func Path(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("log-%016d.wal", seq))
}

// IsFileName says whether name is the name of a log.
func IsFileName(name string) bool {
	return strings.HasPrefix(name, "log-") && strings.HasSuffix(name, ".wal")
}

// List returns the sequence numbers of the logs in dir, in ascending
// order.
func List(dir string) ([]uint64, error) {
	return fileutil.ListNumbered(dir, "log-", ".wal")
}

// Create creates log seq of dir, empty, following the state at
// startRevision, for the directory dirID, durably. When it fails, it
// removes what it created.
func Create(dir string, seq, startRevision, dirID uint64) error {
	return fileutil.CreateSync(Path(dir, seq), Header(startRevision, dirID), fileutil.FileMode)
}

// RemoveBefore removes the logs of l's directory before log seq, which a
// snapshot and the logs from it on make needless. It touches files only,
// no field of l: any goroutine may call it.
func (l *Log) RemoveBefore(seq uint64) error {
	logs, err := List(l.dir)
	for _, n := range logs {
		if n < seq {
			_ = os.Remove(Path(l.dir, n))
		}
	}
	return err
}

// openAppend opens the log at path for appending records.
func openAppend(path string) (File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
}
