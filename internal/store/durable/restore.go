package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

// Restore writes the data directory dir from the backup in file: a
// snapshot of the backup's state, an empty log after it, and a DATA with a
// new directory id and a new epoch (the revisions after the backup's are
// given out again, for other states than those a client may have seen).
// dir must be empty or not exist: Restore never writes over data. It returns
// the backup's revision.
func Restore(file, dir string) (membership.Revision, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	st, err := snap.Decode(data, file)
	if err != nil {
		return 0, fmt.Errorf("%w: it is not a whole backup; take another", err)
	}
	if err := st.Check(); err != nil {
		return 0, fmt.Errorf("%s: %w: it is not a backup this service wrote; take another", file, err)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, err
	case len(entries) > 0:
		return 0, fmt.Errorf("%s is not empty (it has %s): restore into an empty or new directory, never over data", dir, entries[0].Name())
	}
	df := dataFile{id: newRandomID(), epoch: newRandomID(), lastLog: 1}
	if err := snap.WriteFile(snapshotPath(dir, 1), st); err != nil {
		return 0, err
	}
	if err := createLog(dir, 1, uint64(st.LastRevision), df.id); err != nil {
		return 0, err
	}
	if err := df.write(dir); err != nil {
		return 0, err
	}
	return st.LastRevision, nil
}
