package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"example.com/groupmembership/internal/fileheader"
	"example.com/groupmembership/internal/fileutil"
)

// replayLogs replays logs, in order, sets the newest one as the log to
// append to, and returns its format version. A repair may cut the replay
// short: the log it cut is then the newest.
func (l *Log) replayLogs(logs []uint64) (version int, err error) {
	for i, seq := range logs {
		last := i == len(logs)-1
		size, v, err := l.replay(seq, last, logs[i+1:])
		if errors.Is(err, errLogsRemoved) {
			l.seq, l.size = seq, size
			return v, nil
		}
		if err != nil {
			return 0, err
		}
		if last {
			l.seq, l.size, version = seq, size, v
		}
	}
	return version, nil
}

// replay applies the records of log seq, in one pass, and returns the size
// of its valid part and its format version. An incomplete frame at the very
// end of the last log is a write a crash tore: it is cut away with a
// warning, unless MARK says the log was fsynced further (checkMark). Any
// other record that does not check out, a torn one in an earlier log
// included, is damage: refused, naming the file and offset, unless Repair
// is set; then the log is cut there and what is cut, with every later log,
// is moved into a repair directory.
func (l *Log) replay(seq uint64, last bool, later []uint64) (size int64, version int, err error) {
	path := Path(l.dir, seq)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	cut := false
	if last {
		if cut, err = l.checkMark(seq, int64(len(data))); err != nil {
			return 0, 0, err
		}
		if len(data) < HeaderSize {
			return HeaderSize, Version, l.rewriteTornHeader(path)
		}
	}
	if err := l.checkHeader(seq, data, later); err != nil {
		return HeaderSize, Version, err // errLogsRemoved after a repair
	}
	res, err := Read(data, func(payload []byte) error {
		if err := l.opts.Apply(payload); err != nil {
			return errUndecodable{err}
		}
		return nil
	})
	var damage *Damage
	var undecodable errUndecodable
	switch {
	case errors.As(err, &undecodable):
		damage = &Damage{Offset: res.End, Reason: "its payload is not a change: " + undecodable.Error()}
	case errors.As(err, &damage):
	case err != nil:
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	case res.Torn > 0 && last && cut:
		damage = &Damage{Offset: res.End, Reason: fmt.Sprintf("an incomplete record of %d bytes ends the log, which was cut", res.Torn)}
	case res.Torn > 0 && last:
		l.logger.Warn("truncating a torn write at the end of the log", "file", path, "offset", res.End, "bytes", res.Torn)
		return res.End, res.Version, fileutil.Truncate(path, res.End)
	case res.Torn > 0:
		damage = &Damage{Offset: res.End, Reason: fmt.Sprintf("an incomplete record of %d bytes, and later logs follow", res.Torn)}
	default:
		return res.End, res.Version, nil
	}
	return damage.Offset, res.Version, l.repairDamage(seq, data, *damage, later)
}

// errUndecodable marks a record whose checksum is right but whose payload
// is not a change.
type errUndecodable struct{ error }

// rewriteTornHeader writes the header of the log at path again: a crash
// came while the log was being created.
func (l *Log) rewriteTornHeader(path string) error {
	l.logger.Warn("log header torn by a crash; rewriting it", "file", path)
	return fileutil.WriteAtomic(path, fileutil.FileMode, func(w io.Writer) error {
		_, err := w.Write(Header(l.opts.Revision(), l.opts.DirID))
		return err
	})
}

// checkHeader refuses log seq (of a version that has the fields) when it
// belongs to another directory, or does not follow the state replayed so
// far; see repairHeader.
func (l *Log) checkHeader(seq uint64, data []byte, later []uint64) error {
	h, err := ReadHeader(data)
	if err != nil || h.Version < 2 {
		return nil // Read says what is wrong with the header
	}
	path := Path(l.dir, seq)
	before := l.opts.Revision()
	switch {
	case h.DirID != l.opts.DirID && l.opts.DataMissing:
		return fmt.Errorf("%s carries the directory id %016x, and this directory has no DATA (it was lost, or not copied with "+
			"the logs): refusing to start; put DATA back from where the logs came from, or restore the directory with -restore "+
			"from a backup (GET /backup)", path, h.DirID)
	case h.DirID != l.opts.DirID:
		return l.repairHeader(seq, fmt.Sprintf("%s belongs to another data directory (its id is %016x, this directory's %016x): "+
			"it was copied in, or its header is damaged at offset %d", path, h.DirID, l.opts.DirID, fileheader.Size+8), later)
	case h.StartRevision != before:
		return l.repairHeader(seq, fmt.Sprintf("%s follows the state at revision %d, but the state before it is at revision %d: "+
			"the files come from different histories, or its header is damaged at offset %d", path, h.StartRevision, before, fileheader.Size), later)
	}
	return nil
}

// repairHeader refuses log seq, whose header does not fit (wrong says
// how), naming the ways forward, unless Repair is set: then it moves the
// log and the later ones into a repair directory, starts the log again
// empty after the state replayed so far, and returns errLogsRemoved.
// Which of the header or the records is wrong cannot be told: the records
// are not replayed onto a state they may not follow.
func (l *Log) repairHeader(seq uint64, wrong string, later []uint64) error {
	path := Path(l.dir, seq)
	before := l.opts.Revision()
	if !l.opts.Repair {
		moves := filepath.Base(path)
		if len(later) > 0 {
			moves += fmt.Sprintf(" and the %d logs after it", len(later))
		}
		return fmt.Errorf("%s; refusing to start. Restore the directory from a backup, or start with -repair: it moves %s "+
			"into a repair directory and goes on from revision %d, without the changes they hold", wrong, moves, before)
	}
	dir, err := l.moveToRepair(append([]uint64{seq}, later...)...)
	if err != nil {
		return err
	}
	if err := Create(l.dir, seq, before, l.opts.DirID); err != nil {
		return err
	}
	l.logger.Warn("repair: moved aside a log whose header does not fit, and the logs after it, and started it again empty: "+
		"the changes they held are lost", "err", wrong, "moved_to", dir)
	return errLogsRemoved
}

// repairDamage refuses damage to log seq, naming the way forward, unless
// Repair is set: then it cuts the log there, keeping what it cuts and the
// later logs in a repair directory, and returns errLogsRemoved.
func (l *Log) repairDamage(seq uint64, data []byte, damage Damage, later []uint64) error {
	path := Path(l.dir, seq)
	if !l.opts.Repair {
		return fmt.Errorf("%s is damaged at offset %d (%s): refusing to start, to lose no acknowledged change. "+
			"Restore the directory from a backup, or start with -repair: it cuts the log there and moves the %d bytes after it, "+
			"and the %d logs after this one, into a repair directory", path, damage.Offset, damage.Reason, int64(len(data))-damage.Offset, len(later))
	}
	moved, err := l.repairLog(seq, data, damage.Offset, later)
	if err != nil {
		return err
	}
	l.logger.Warn("repair: cut the log at a damaged record; what followed is kept in the repair directory",
		"file", path, "offset", damage.Offset, "reason", damage.Reason, "moved_to", moved)
	return errLogsRemoved
}

// repairLog cuts log seq at offset, after copying what it cuts, and moving
// every later log, into a new repair directory, whose path it returns.
// Nothing is deleted.
func (l *Log) repairLog(seq uint64, data []byte, offset int64, later []uint64) (string, error) {
	dir, err := l.moveToRepair(later...)
	if err != nil {
		return "", err
	}
	tail := filepath.Join(dir, filepath.Base(Path(l.dir, seq))+fmt.Sprintf(".from-%d", offset))
	if err := fileutil.CreateSync(tail, data[offset:], fileutil.FileMode); err != nil {
		return "", err
	}
	return dir, fileutil.Truncate(Path(l.dir, seq), offset)
}

// errLogsRemoved is not an error for the caller: replay returns it after a
// repair moved away the logs that came after the one it cut.
var errLogsRemoved = errors.New("logs removed")
