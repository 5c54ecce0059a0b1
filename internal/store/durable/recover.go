package durable

// Recovery: what Open does before it takes changes. It checks the
// directory's files against each other and against DATA, loads the newest
// snapshot, replays the logs after it, and refuses damage, or with -repair
// mends it, keeping what it drops in a repair directory.

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"example.com/groupmembership/internal/fileheader"
	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/internal/store/wal/record"
)

// recover loads the newest snapshot that reads back and replays the logs
// after it, then opens the newest log for appending. The files must form a
// chain: snapshot-N, then log-N, log-N+1, … with no gap (log-1 on when there
// is no snapshot), each log starting at the revision where the state before
// it ends. A file missing from the chain is refused, naming it. A damaged
// newest snapshot is refused too, naming -repair when an older snapshot and
// the logs after it are there to recover every change from: the store keeps
// them until a newer snapshot has been written and read back. The newest
// log is checked against MARK (see mark.go), which is then written anew. A
// directory that holds a restore that did not finish is refused, naming
// -restore.
func (d *Store) recover() error {
	if unfinished, err := unfinishedRestore(d.dir); err != nil || unfinished {
		return cmp.Or(err, errUnfinishedRestore(d.dir))
	}
	if err := removeTemps(d.dir); err != nil {
		return err
	}
	logs, snapshots, err := files(d.dir)
	if err != nil {
		return err
	}
	hasData, err := d.readData(len(logs) > 0, len(snapshots) > 0)
	if err != nil {
		return err
	}
	d.readStartMark()
	base, err := d.loadSnapshot(snapshots, logs)
	if err != nil {
		return err
	}
	logs = slices.DeleteFunc(logs, func(n uint64) bool { return n < base })
	if hasData && len(logs) == 0 && base == 0 {
		return fmt.Errorf("the data directory %s has held data (it has %s) but has no log and no snapshot now: "+
			"its files were moved or deleted; refusing to start empty. Restore them from a backup, "+
			"or remove %s to start with no data", d.dir, dataFileName, filepath.Join(d.dir, dataFileName))
	}
	if logs, err = d.checkFiles(base, logs, hasData); err != nil {
		return err
	}
	if len(logs) == 0 {
		// A new directory.
		if err := d.createLog(1, 0); err != nil {
			return err
		}
		logs = []uint64{1}
	}
	version, err := d.replayLogs(logs)
	if err != nil {
		return err
	}
	if err := d.openLog(version); err != nil {
		return err
	}
	if err := d.startMarker(); err != nil {
		d.log.Close()
		return err
	}
	return nil
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
		d.dataMissing = hasLogs
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

// replayLogs replays logs, in order, sets the newest one as the log to
// append to, and returns its format version. A repair may cut the replay
// short: the log it cut is then the newest.
func (d *Store) replayLogs(logs []uint64) (version int, err error) {
	for i, seq := range logs {
		last := i == len(logs)-1
		size, v, err := d.replay(seq, last, logs[i+1:])
		if errors.Is(err, errLogsRemoved) {
			d.logSeq, d.logSize = seq, size
			return v, nil
		}
		if err != nil {
			return 0, err
		}
		if last {
			d.logSeq, d.logSize, version = seq, size, v
		}
	}
	return version, nil
}

// openLog opens the newest log for appending, after starting a new one
// when the newest is of an older format version, and writes DATA with no
// clean stop in it until the next one.
func (d *Store) openLog(version int) error {
	if version != wal.Version {
		// Records of this version go into a log of its own.
		next := d.logSeq + 1
		if err := d.createLog(next, uint64(d.mem.LatestRevision())); err != nil {
			return err
		}
		d.logger.Info("started a new log in the current format", "file", logPath(d.dir, next), "after_version", version)
		d.logSeq, d.logSize = next, wal.HeaderSize
	}
	d.dataFile.lastLog, d.dataFile.closedLog, d.dataFile.closedSize = d.logSeq, 0, 0
	if err := d.dataFile.write(d.dir); err != nil {
		return err
	}
	var err error
	d.log, err = d.opts.openLog(logPath(d.dir, d.logSeq))
	return err
}

// loadSnapshot loads the newest snapshot and returns its sequence number, 0
// when there is none. When it does not read back, it refuses, or with
// Repair moves it into a repair directory and loads the one before.
func (d *Store) loadSnapshot(snapshots, logs []uint64) (uint64, error) {
	for i := len(snapshots) - 1; i >= 0; i-- {
		seq := snapshots[i]
		path := snapshotPath(d.dir, seq)
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
				_, err := checkSnapshot(snapshotPath(d.dir, from))
				older = err == nil
			}
			if older && checkChain(d.dir, from, slices.DeleteFunc(slices.Clone(logs), func(n uint64) bool { return n < from })) == nil {
				what := "the logs from the first"
				if from > 0 {
					what = filepath.Base(snapshotPath(d.dir, from)) + " and the logs after it"
				}
				way = fmt.Sprintf("start with -repair: it moves %s into a repair directory and recovers every change from %s", filepath.Base(path), what)
			}
			return 0, fmt.Errorf("%s does not read back (%v): refusing to start; %s", path, err, way)
		}
		dir, moveErr := d.moveToRepair(path)
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
	st, err := snap.ReadFileEach(path, func(g snap.Group) error {
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
	return snap.ReadFileEach(path, func(snap.Group) error { return nil })
}

// checkChain returns an error naming what is missing unless logs (those from
// base on, sorted) follow snapshot base, or the start when base is 0, with
// no gap.
func checkChain(dir string, base uint64, logs []uint64) error {
	first := max(base, 1)
	missing := func(seq uint64, why string) error {
		return fmt.Errorf("%s is missing (%s): refusing to start with part of the data; restore the directory, or the missing file, from a backup",
			logPath(dir, seq), why)
	}
	switch {
	case len(logs) == 0 && base > 0:
		return missing(base, fmt.Sprintf("%s is followed by no log", filepath.Base(snapshotPath(dir, base))))
	case len(logs) > 0 && logs[0] != first && base == 0:
		return fmt.Errorf("the logs start at %s, and no snapshot is here to hold what came before: refusing to start with part of the data; "+
			"restore the snapshot (snapshot-%016d.snap) or the earlier logs from a backup", filepath.Base(logPath(dir, logs[0])), logs[0])
	case len(logs) > 0 && logs[0] != first:
		return missing(first, fmt.Sprintf("%s is followed by %s", filepath.Base(snapshotPath(dir, base)), filepath.Base(logPath(dir, logs[0]))))
	}
	for i := 1; i < len(logs); i++ {
		if logs[i] != logs[i-1]+1 {
			return missing(logs[i-1]+1, fmt.Sprintf("between %s and %s", filepath.Base(logPath(dir, logs[i-1])), filepath.Base(logPath(dir, logs[i]))))
		}
	}
	return nil
}

// moveToRepair makes a new repair directory, DIR/repair-<time>, where a
// repair keeps what it drops, moves the files at paths into it, durably, and
// returns its path. It renews the epoch first.
func (d *Store) moveToRepair(paths ...string) (string, error) {
	if err := d.renewEpoch(); err != nil {
		return "", err
	}
	dir := filepath.Join(d.dir, "repair-"+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.Mkdir(dir, dirMode); err != nil {
		return "", err
	}
	for _, path := range paths {
		if err := os.Rename(path, filepath.Join(dir, filepath.Base(path))); err != nil {
			return "", err
		}
	}
	return dir, errors.Join(fileutil.SyncDir(dir), fileutil.SyncDir(d.dir))
}

// renewEpoch draws a new epoch, and writes it to DATA, before a repair
// changes anything: a repair may take the state back, and give its
// revisions out again for other states, whose ETags must differ from the
// old ones (which clients and caches may still hold).
func (d *Store) renewEpoch() error {
	d.dataFile.epoch = newRandomID()
	return d.dataFile.write(d.dir)
}

// logPaths returns the paths of logs seqs of the store's directory.
func (d *Store) logPaths(seqs []uint64) []string {
	paths := make([]string, len(seqs))
	for i, seq := range seqs {
		paths[i] = logPath(d.dir, seq)
	}
	return paths
}

// createLog creates log seq of dir, following the state at startRevision,
// for the directory dirID, durably. When it fails, it removes what it
// created.
func createLog(dir string, seq, startRevision, dirID uint64) error {
	return fileutil.CreateSync(logPath(dir, seq), wal.Header(startRevision, dirID), fileMode)
}

// createLog creates log seq of the store's directory.
func (d *Store) createLog(seq, startRevision uint64) error {
	return createLog(d.dir, seq, startRevision, d.dataFile.id)
}

// checkFiles checks the logs from base on against the chain and DATA, and
// returns them. What a -repair can go on without, it goes on without, with
// a warning that says what is lost: a missing newest log (created empty), a
// missing log between two (the logs after the gap are moved aside), a log
// cut while the service was stopped.
func (d *Store) checkFiles(base uint64, logs []uint64, hasData bool) ([]uint64, error) {
	if err := checkChain(d.dir, base, logs); err != nil {
		if !d.opts.Repair {
			return nil, fmt.Errorf("%w; or start with -repair to go on without it, losing the changes it held", err)
		}
		var repairErr error
		if logs, repairErr = d.repairChain(base, logs, err); repairErr != nil {
			return nil, repairErr
		}
	}
	if !hasData || len(logs) == 0 {
		return logs, nil
	}
	return logs, d.checkNewestLog(logs[len(logs)-1])
}

// repairChain keeps the logs that follow snapshot base (or the start) with
// no gap, moves the rest aside, and starts an empty log after the snapshot
// when none follows it. gap is what checkChain found.
func (d *Store) repairChain(base uint64, logs []uint64, gap error) ([]uint64, error) {
	first := max(base, 1)
	kept := []uint64{}
	for i, l := range logs {
		if l != first+uint64(i) {
			break
		}
		kept = append(kept, l)
	}
	if moved := logs[len(kept):]; len(moved) > 0 {
		dir, err := d.moveToRepair(d.logPaths(moved)...)
		if err != nil {
			return nil, err
		}
		d.logger.Warn("repair: a log is missing; moved the logs after the gap aside: their changes are lost", "err", gap, "moved_to", dir)
	}
	if len(kept) > 0 || base == 0 {
		return kept, nil
	}
	st, err := checkSnapshot(snapshotPath(d.dir, base))
	if err != nil {
		return nil, err
	}
	if err := d.renewEpoch(); err != nil {
		return nil, err
	}
	if err := d.createLog(base, uint64(st.LastRevision)); err != nil {
		return nil, err
	}
	d.logger.Warn("repair: the log after the snapshot is missing; started an empty one: the changes it held are lost", "file", logPath(d.dir, base))
	return []uint64{base}, nil
}

// checkNewestLog checks log newest against what DATA says of the last
// stop: a newer log that is gone, or a log shorter than it was, is refused,
// or with -repair gone on without, with a warning.
func (d *Store) checkNewestLog(newest uint64) error {
	var lost error
	if d.dataFile.lastLog > newest {
		lost = fmt.Errorf("%s is missing: this directory has had it (%s says so), and it is the newest log: "+
			"restore it from a backup", logPath(d.dir, d.dataFile.lastLog), dataFileName)
		if !d.opts.Repair {
			return fmt.Errorf("%w; or start with -repair to go on without it, losing the changes it held", lost)
		}
		if err := d.renewEpoch(); err != nil {
			return err
		}
		d.logger.Warn("repair: going on without the newest log: the changes it held are lost", "err", lost)
	}
	if d.dataFile.closedLog != newest {
		return nil
	}
	info, err := os.Stat(logPath(d.dir, newest))
	if err != nil {
		return err
	}
	if info.Size() >= d.dataFile.closedSize {
		return nil
	}
	lost = fmt.Errorf("%s is %d bytes, shorter than the %d it had when the service last stopped: it was cut, "+
		"and the changes at its end are lost; restore it from a backup", logPath(d.dir, newest), info.Size(), d.dataFile.closedSize)
	if !d.opts.Repair {
		return fmt.Errorf("%w; or start with -repair to go on without them", lost)
	}
	if err := d.renewEpoch(); err != nil {
		return err
	}
	d.logger.Warn("repair: going on with a log that was cut", "err", lost)
	return nil
}

// replay applies the records of log seq, in one pass, and returns the size
// of its valid part and its format version. An incomplete frame at the very
// end of the last log is a write a crash tore: it is cut away with a
// warning, unless MARK says the log was fsynced further (checkMark). Any
// other record that does not check out, a torn one in an earlier log
// included, is damage: refused, naming the file and offset, unless Repair
// is set; then the log is cut there and what is cut, with every later log,
// is moved into a repair directory.
func (d *Store) replay(seq uint64, last bool, later []uint64) (size int64, version int, err error) {
	path := logPath(d.dir, seq)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	cut := false
	if last {
		if cut, err = d.checkMark(seq, int64(len(data))); err != nil {
			return 0, 0, err
		}
		if len(data) < wal.HeaderSize {
			return wal.HeaderSize, wal.Version, d.rewriteTornHeader(path)
		}
	}
	if err := d.checkLogHeader(seq, data, later); err != nil {
		return wal.HeaderSize, wal.Version, err // errLogsRemoved after a repair
	}
	res, err := wal.Read(data, func(payload []byte) error {
		r, err := record.Decode(payload)
		if err != nil {
			return errUndecodable{err}
		}
		_ = applyRecord(d.mem, r) // fails as it failed when written: a precondition another write overtook
		return nil
	})
	var damage *wal.Damage
	var undecodable errUndecodable
	switch {
	case errors.As(err, &undecodable):
		damage = &wal.Damage{Offset: res.End, Reason: "its payload is not a change: " + undecodable.Error()}
	case errors.As(err, &damage):
	case err != nil:
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	case res.Torn > 0 && last && cut:
		damage = &wal.Damage{Offset: res.End, Reason: fmt.Sprintf("an incomplete record of %d bytes ends the log, which was cut", res.Torn)}
	case res.Torn > 0 && last:
		d.logger.Warn("truncating a torn write at the end of the log", "file", path, "offset", res.End, "bytes", res.Torn)
		return res.End, res.Version, fileutil.Truncate(path, res.End)
	case res.Torn > 0:
		damage = &wal.Damage{Offset: res.End, Reason: fmt.Sprintf("an incomplete record of %d bytes, and later logs follow", res.Torn)}
	default:
		return res.End, res.Version, nil
	}
	return damage.Offset, res.Version, d.repairDamage(seq, data, *damage, later)
}

// rewriteTornHeader writes the header of the log at path again: a crash
// came while the log was being created.
func (d *Store) rewriteTornHeader(path string) error {
	d.logger.Warn("log header torn by a crash; rewriting it", "file", path)
	if err := os.WriteFile(path, wal.Header(uint64(d.mem.LatestRevision()), d.dataFile.id), fileMode); err != nil {
		return err
	}
	return fileutil.SyncFile(path)
}

// checkLogHeader refuses log seq (of a version that has the fields) when
// it belongs to another directory, or does not follow the state loaded so
// far; see repairHeader.
func (d *Store) checkLogHeader(seq uint64, data []byte, later []uint64) error {
	h, err := wal.ReadHeader(data)
	if err != nil || h.Version < 2 {
		return nil // wal.Read says what is wrong with the header
	}
	path := logPath(d.dir, seq)
	before := d.mem.LatestRevision()
	switch {
	case h.DirID != d.dataFile.id && d.dataMissing:
		return fmt.Errorf("%s carries the directory id %016x, and this directory has no %s (it was lost, or not copied with "+
			"the logs): refusing to start; put %s back from where the logs came from, or restore the directory with -restore "+
			"from a backup (GET /backup)", path, h.DirID, dataFileName, dataFileName)
	case h.DirID != d.dataFile.id:
		return d.repairHeader(seq, fmt.Sprintf("%s belongs to another data directory (its id is %016x, this directory's %016x): "+
			"it was copied in, or its header is damaged at offset %d", path, h.DirID, d.dataFile.id, fileheader.Size+8), later)
	case h.StartRevision != uint64(before):
		return d.repairHeader(seq, fmt.Sprintf("%s follows the state at revision %d, but the state before it is at revision %d: "+
			"the files come from different histories, or its header is damaged at offset %d", path, h.StartRevision, before, fileheader.Size), later)
	}
	return nil
}

// repairHeader refuses log seq, whose header does not fit (wrong says
// how), naming the ways forward, unless Repair is set: then it moves the
// log and the later ones into a repair directory, starts the log again
// empty after the state loaded so far, and returns errLogsRemoved. Which
// of the header or the records is wrong cannot be told: the records are
// not replayed onto a state they may not follow.
func (d *Store) repairHeader(seq uint64, wrong string, later []uint64) error {
	path := logPath(d.dir, seq)
	before := d.mem.LatestRevision()
	if !d.opts.Repair {
		moves := filepath.Base(path)
		if len(later) > 0 {
			moves += fmt.Sprintf(" and the %d logs after it", len(later))
		}
		return fmt.Errorf("%s; refusing to start. Restore the directory from a backup, or start with -repair: it moves %s "+
			"into a repair directory and goes on from revision %d, without the changes they hold", wrong, moves, before)
	}
	dir, err := d.moveToRepair(d.logPaths(append([]uint64{seq}, later...))...)
	if err != nil {
		return err
	}
	if err := d.createLog(seq, uint64(before)); err != nil {
		return err
	}
	d.logger.Warn("repair: moved aside a log whose header does not fit, and the logs after it, and started it again empty: "+
		"the changes they held are lost", "err", wrong, "moved_to", dir)
	return errLogsRemoved
}

// repairDamage refuses damage to log seq, naming the way forward, unless
// Repair is set: then it cuts the log there, keeping what it cuts and the
// later logs in a repair directory, and returns errLogsRemoved.
func (d *Store) repairDamage(seq uint64, data []byte, damage wal.Damage, later []uint64) error {
	path := logPath(d.dir, seq)
	if !d.opts.Repair {
		return fmt.Errorf("%s is damaged at offset %d (%s): refusing to start, to lose no acknowledged change. "+
			"Restore the directory from a backup, or start with -repair: it cuts the log there and moves the %d bytes after it, "+
			"and the %d logs after this one, into a repair directory", path, damage.Offset, damage.Reason, int64(len(data))-damage.Offset, len(later))
	}
	moved, err := d.repairLog(seq, data, damage.Offset, later)
	if err != nil {
		return err
	}
	d.logger.Warn("repair: cut the log at a damaged record; what followed is kept in the repair directory",
		"file", path, "offset", damage.Offset, "reason", damage.Reason, "moved_to", moved)
	return errLogsRemoved
}

// errUndecodable marks a record whose checksum is right but whose payload is
// not a change.
type errUndecodable struct{ error }

// repairLog cuts log seq at offset, after copying what it cuts, and moving
// every later log, into a new repair directory, whose path it returns.
// Nothing is deleted.
func (d *Store) repairLog(seq uint64, data []byte, offset int64, later []uint64) (string, error) {
	dir, err := d.moveToRepair(d.logPaths(later)...)
	if err != nil {
		return "", err
	}
	tail := filepath.Join(dir, filepath.Base(logPath(d.dir, seq))+fmt.Sprintf(".from-%d", offset))
	if err := fileutil.CreateSync(tail, data[offset:], fileMode); err != nil {
		return "", err
	}
	return dir, fileutil.Truncate(logPath(d.dir, seq), offset)
}

// errLogsRemoved is not an error for the caller: replay returns it after a
// repair moved away the logs that came after the one it cut.
var errLogsRemoved = errors.New("logs removed")
