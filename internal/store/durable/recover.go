package durable

// Recovery: what Open does before it takes changes. It checks the
// directory against DATA, loads the newest snapshot, and opens the log
// after it (package wal), which replays the logs into memory; it refuses
// damage, or with -repair mends it, keeping what it drops in a repair
// directory.

import (
	"cmp"
	"fmt"
	"path/filepath"

	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/internal/store/wal/record"
)

// recover loads the newest snapshot that reads back and opens the log
// after it, replaying its records (see wal.Open: the snapshot and the logs
// must form a chain, a file missing from it is refused, naming it). A
// damaged newest snapshot is refused too, naming -repair when an older
// snapshot and the logs after it are there to recover every change from:
// the store keeps them until a newer snapshot has been written and read
// back. A directory that holds a restore that did not finish is refused,
// naming -restore.
func (d *Store) recover() error {
	if unfinished, err := unfinishedRestore(d.dir); err != nil || unfinished {
		return cmp.Or(err, errUnfinishedRestore(d.dir))
	}
	if err := removeTemps(d.dir); err != nil {
		return err
	}
	logs, err := wal.List(d.dir)
	if err != nil {
		return err
	}
	snapshots, err := snap.List(d.dir)
	if err != nil {
		return err
	}
	hasData, err := d.readData(len(logs) > 0, len(snapshots) > 0)
	if err != nil {
		return err
	}
	mark := wal.ReadStartMark(d.dir, d.dataFile.id, d.logger)
	base, err := d.loadSnapshot(snapshots, logs)
	if err != nil {
		return err
	}
	if hasData && len(logs) == 0 && base == 0 {
		return fmt.Errorf("the data directory %s has held data (it has %s) but has no log and no snapshot now: "+
			"its files were moved or deleted; refusing to start empty. Restore them from a backup, "+
			"or remove %s to start with no data", d.dir, dataFileName, filepath.Join(d.dir, dataFileName))
	}
	d.log, err = wal.Open(d.dir, base, d.logOptions(mark, !hasData))
	return err
}

// logOptions returns the options of the log: what DATA says, and the
// store's part, memory to replay into and DATA to keep.
func (d *Store) logOptions(mark wal.StartMark, dataMissing bool) wal.Options {
	df := d.dataFile
	return wal.Options{
		Repair: d.opts.Repair, Logger: d.logger,
		DirID: df.id, DataMissing: dataMissing, LastLog: df.lastLog, ClosedLog: df.closedLog, ClosedSize: df.closedSize,
		Mark: mark,
		Apply: func(payload []byte) error {
			r, err := record.Decode(payload)
			if err != nil {
				return err
			}
			_ = applyRecord(d.mem, r) // fails as it failed when written: a precondition another write overtook
			return nil
		},
		Revision:     func() uint64 { return uint64(d.mem.LatestRevision()) },
		BeforeRepair: d.renewEpoch,
		Newest:       d.recordNewestLog,
		Closed:       d.recordCleanStop,
		OpenFile:     d.opts.openLog,
		OpenMark:     d.opts.openMark,
	}
}

// readData reads DATA into d.dataFile, and says whether it was there. A
// directory without it gets a new id; one whose service did not stop
// cleanly gets a new epoch. A directory with its LOCK and nothing else lost
// its files: refused.
func (d *Store) readData(hasLogs, hasSnapshots bool) (bool, error) {
	df, hasData, err := readDataFile(d.dir)
	if err != nil {
		return false, err
	}
	if !hasData {
		if !hasLogs && !hasSnapshots && d.lock.Existed() {
			return false, fmt.Errorf("the data directory %s has a LOCK but no %s, no log and no snapshot: its files were deleted "+
				"(or its first start stopped before it wrote any); refusing to start empty. Restore them from a backup, "+
				"or delete %s to start with no data", d.dir, dataFileName, filepath.Join(d.dir, "LOCK"))
		}
		df.id = newRandomID() // a new directory, or one of a version before DATA
	}
	if df.epoch == 0 || hasData && df.closedLog == 0 {
		// A new directory, one of a version before epochs, or one whose
		// service did not stop cleanly: what its logs lost at their end
		// cannot always be told from a crash, and revisions given out
		// again must not repeat ETags.
		df.epoch = newRandomID()
	}
	d.dataFile = df
	return hasData, nil
}

// loadSnapshot loads the newest snapshot and returns its sequence number, 0
// when there is none. When it does not read back, it refuses, or with
// Repair moves it into a repair directory and loads the one before.
func (d *Store) loadSnapshot(snapshots, logs []uint64) (uint64, error) {
	for i := len(snapshots) - 1; i >= 0; i-- {
		seq := snapshots[i]
		path := snap.Path(d.dir, seq)
		groups := 0
		err := d.loadSnapshotFile(path, &groups)
		if err == nil {
			d.logger.Info("loaded snapshot", "file", path, "groups", groups)
			return seq, nil
		}
		if !d.opts.Repair {
			way := "restore the directory from a backup: no older snapshot, nor the logs from the start, are here to recover from"
			from := uint64(0) // the logs from the start
			if i > 0 {
				from = snapshots[i-1]
			}
			older := from == 0
			if !older {
				_, err := checkSnapshot(snap.Path(d.dir, from))
				older = err == nil
			}
			if older && wal.CheckChain(d.dir, from, logs) == nil {
				what := "the logs from the first"
				if from > 0 {
					what = snap.FileName(from) + " and the logs after it"
				}
				way = fmt.Sprintf("start with -repair: it moves %s into a repair directory and recovers every change from %s", filepath.Base(path), what)
			}
			return 0, fmt.Errorf("%s does not read back (%v): refusing to start; %s", path, err, way)
		}
		if err := d.renewEpoch(); err != nil {
			return 0, err
		}
		dir, moveErr := fileutil.MoveToRepair(d.dir, path)
		if moveErr != nil {
			return 0, moveErr
		}
		d.logger.Warn("repair: a snapshot does not read back; moved it aside, recovering from the one before", "file", path, "err", err, "moved_to", dir)
	}
	return 0, nil
}

// loadSnapshotFile loads the snapshot at path into d.mem, which must be
// empty, counting its groups into groups. It loads the groups one at a
// time as it reads them, not the whole state decoded first. When the
// snapshot does not read back, d.mem is a new, empty store: the groups
// read before the fault are dropped.
func (d *Store) loadSnapshotFile(path string, groups *int) error {
	l := d.mem.Loader()
	st, err := snap.ReadFile(path, func(g snap.Group) error {
		*groups++
		return l.Group(g)
	})
	if err != nil {
		l.Drop()
		d.mem = d.newMemory()
		return err
	}
	l.Finish(st)
	return nil
}

// checkSnapshot returns an error unless the snapshot at path reads back,
// and the snapshot without its groups, which it does not keep.
func checkSnapshot(path string) (*snap.State, error) {
	return snap.ReadFile(path, func(snap.Group) error { return nil })
}

// renewEpoch draws a new epoch, and writes it to DATA, before a repair
// changes anything: a repair may take the state back, and give its
// revisions out again for other states, whose ETags must differ from the
// old ones (which clients and caches may still hold).
func (d *Store) renewEpoch() error {
	d.dataFile.epoch = newRandomID()
	return d.dataFile.write(d.dir)
}
