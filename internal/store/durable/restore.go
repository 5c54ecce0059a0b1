package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

// restoringFileName is the marker a restore writes into the data directory
// before anything else and removes after everything else: a directory
// that has it holds a restore that did not finish, which the service
// refuses to start on and Restore starts over.
const restoringFileName = "RESTORING"

// Restore writes the data directory dir from the backup in file: a
// snapshot of the backup's state, an empty log after it, and a DATA with a
// new directory id and a new epoch (the revisions after the backup's are
// given out again, for other states than those a client may have seen).
// dir must be empty, not exist, or hold a restore that did not finish,
// which Restore starts over: Restore never writes over data. It holds the
// directory's lock while it writes, and RESTORING is there from its first
// write to its last. It returns the backup's revision.
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
	if err := checkRestoreTarget(dir); err != nil {
		return 0, err
	}
	lock, err := LockDataDir(dir)
	if err != nil {
		return 0, err
	}
	defer lock.Release()
	// Again, under the lock: a service may have started on dir, written
	// and stopped since the first look.
	if err := checkRestoreTarget(dir); err != nil {
		return 0, err
	}
	if err := writeRestore(dir, st); err != nil {
		return 0, err
	}
	return st.LastRevision, nil
}

// checkRestoreTarget returns nil when dir is missing, empty, holds only a
// LOCK (a first start that wrote nothing, or a restore stopped as it
// began), or holds a restore that did not finish; and otherwise an error
// that names what is in it.
func checkRestoreTarget(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if unfinished, err := unfinishedRestore(dir); err != nil || unfinished {
		return err
	}
	for _, e := range entries {
		if e.Name() != lockFileName {
			return fmt.Errorf("%s is not empty (it has %s): restore into an empty or new directory, never over data", dir, e.Name())
		}
	}
	return nil
}

// writeRestore writes st into dir, which the caller has locked: RESTORING
// first, then the files of an earlier try removed, the snapshot, the log
// and DATA, and RESTORING removed last.
func writeRestore(dir string, st *snap.State) error {
	marker := filepath.Join(dir, restoringFileName)
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		// Created in place, not renamed into it: a restore stopped while
		// it writes the marker leaves the marker, or nothing but LOCK.
		if err := fileutil.CreateSync(marker, []byte("a restore into this directory did not finish: run -restore again\n"), fileutil.FileMode); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := removeRestoreFiles(dir); err != nil {
		return err
	}
	df := dataFile{id: newRandomID(), epoch: newRandomID(), lastLog: 1}
	if err := snap.WriteFile(snap.Path(dir, 1), st); err != nil {
		return err
	}
	if err := wal.Create(dir, 1, uint64(st.LastRevision), df.id); err != nil {
		return err
	}
	if err := df.write(dir); err != nil {
		return err
	}
	if err := os.Remove(marker); err != nil {
		return err
	}
	return fileutil.SyncDir(dir)
}

// removeRestoreFiles removes from dir what a restore writes, but the
// marker and the lock, so that a restore can start over. When dir holds
// anything else, it removes nothing and refuses: it is not a restore's.
func removeRestoreFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var remove []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == restoringFileName || name == lockFileName:
		case isRestoreFile(name):
			remove = append(remove, filepath.Join(dir, name))
		default:
			return fmt.Errorf("%s holds a restore that did not finish, and %s, which a restore does not write: "+
				"restore into an empty or new directory", dir, name)
		}
	}
	for _, path := range remove {
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return fileutil.SyncDir(dir)
}

// isRestoreFile says whether name is one of the files a restore writes.
func isRestoreFile(name string) bool {
	return name == dataFileName || strings.HasSuffix(name, ".tmp") || snap.IsFileName(name) || wal.IsFileName(name)
}

// unfinishedRestore says whether dir holds a restore that did not finish:
// it has RESTORING, or nothing but a snapshot's temporary file (and perhaps LOCK), which is what a restore of
// a version before RESTORING left when it was stopped while it wrote the
// snapshot. The service never writes a snapshot into a directory without
// a log.
func unfinishedRestore(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	snapshotTemp, others := false, false
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == restoringFileName:
			return true, nil
		case strings.HasPrefix(name, "snapshot-") && strings.HasSuffix(name, ".tmp"):
			snapshotTemp = true
		case name != lockFileName:
			others = true
		}
	}
	return snapshotTemp && !others, nil
}

// errUnfinishedRestore is the refusal of a data directory that holds a
// restore that did not finish.
func errUnfinishedRestore(dir string) error {
	return fmt.Errorf("the data directory %s holds a restore that did not finish (%s is there, or only a snapshot's "+
		"temporary file): refusing to start on it. Run -restore again with the backup and -data-dir %s (it starts over), "+
		"or remove %s to start with no data", dir, restoringFileName, dir, dir)
}
