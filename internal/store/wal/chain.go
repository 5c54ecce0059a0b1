package wal

// The chain: snapshot N, then log N, N+1, … with no gap (log 1 on when
// there is no snapshot), the newest as DATA says it was.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/internal/store/snap"
)

// CheckChain returns an error naming what is missing unless logs (the
// logs of dir, sorted) follow snapshot base, or the start when base is 0,
// with no gap. The logs before base do not count.
func CheckChain(dir string, base uint64, logs []uint64) error {
	logs = slices.DeleteFunc(slices.Clone(logs), func(n uint64) bool { return n < base })
	first := max(base, 1)
	missing := func(seq uint64, why string) error {
		return fmt.Errorf("%s is missing (%s): refusing to start with part of the data; restore the directory, or the missing file, from a backup",
			Path(dir, seq), why)
	}
	switch {
	case len(logs) == 0 && base > 0:
		return missing(base, fmt.Sprintf("%s is followed by no log", snap.FileName(base)))
	case len(logs) > 0 && logs[0] != first && base == 0:
		return fmt.Errorf("the logs start at %s, and no snapshot is here to hold what came before: refusing to start with part of the data; "+
			"restore the snapshot (%s) or the earlier logs from a backup", filepath.Base(Path(dir, logs[0])), snap.FileName(logs[0]))
	case len(logs) > 0 && logs[0] != first:
		return missing(first, fmt.Sprintf("%s is followed by %s", snap.FileName(base), filepath.Base(Path(dir, logs[0]))))
	}
	for i := 1; i < len(logs); i++ {
		if logs[i] != logs[i-1]+1 {
			return missing(logs[i-1]+1, fmt.Sprintf("between %s and %s", filepath.Base(Path(dir, logs[i-1])), filepath.Base(Path(dir, logs[i]))))
		}
	}
	return nil
}

// checkFiles checks the logs from base on against the chain and DATA, and
// returns them. What a repair can go on without, it goes on without, with
// a warning that says what is lost: a missing newest log (created empty), a
// missing log between two (the logs after the gap are moved aside), a log
// cut while the service was stopped.
func (l *Log) checkFiles(base uint64, logs []uint64) ([]uint64, error) {
	if err := CheckChain(l.dir, base, logs); err != nil {
		if !l.opts.Repair {
			return nil, fmt.Errorf("%w; or start with -repair to go on without it, losing the changes it held", err)
		}
		var repairErr error
		if logs, repairErr = l.repairChain(base, logs, err); repairErr != nil {
			return nil, repairErr
		}
	}
	if len(logs) == 0 {
		return logs, nil
	}
	return logs, l.checkNewestLog(logs[len(logs)-1])
}

// repairChain keeps the logs that follow snapshot base (or the start) with
// no gap, moves the rest aside, and starts an empty log after the snapshot
// when none follows it. gap is what CheckChain found.
func (l *Log) repairChain(base uint64, logs []uint64, gap error) ([]uint64, error) {
	first := max(base, 1)
	kept := []uint64{}
	for i, n := range logs {
		if n != first+uint64(i) {
			break
		}
		kept = append(kept, n)
	}
	if moved := logs[len(kept):]; len(moved) > 0 {
		dir, err := l.moveToRepair(moved...)
		if err != nil {
			return nil, err
		}
		l.logger.Warn("repair: a log is missing; moved the logs after the gap aside: their changes are lost", "err", gap, "moved_to", dir)
	}
	if len(kept) > 0 || base == 0 {
		return kept, nil
	}
	if err := l.opts.BeforeRepair(); err != nil {
		return nil, err
	}
	if err := Create(l.dir, base, l.opts.Revision(), l.opts.DirID); err != nil {
		return nil, err
	}
	l.logger.Warn("repair: the log after the snapshot is missing; started an empty one: the changes it held are lost", "file", Path(l.dir, base))
	return []uint64{base}, nil
}

// checkNewestLog checks log newest against what DATA says of the last
// stop: a newer log that is gone, or a log shorter than it was, is refused,
// or with Repair gone on without, with a warning.
func (l *Log) checkNewestLog(newest uint64) error {
	var lost error
	if l.opts.LastLog > newest {
		lost = fmt.Errorf("%s is missing: this directory has had it (DATA says so), and it is the newest log: "+
			"restore it from a backup", Path(l.dir, l.opts.LastLog))
		if !l.opts.Repair {
			return fmt.Errorf("%w; or start with -repair to go on without it, losing the changes it held", lost)
		}
		if err := l.opts.BeforeRepair(); err != nil {
			return err
		}
		l.logger.Warn("repair: going on without the newest log: the changes it held are lost", "err", lost)
	}
	if l.opts.ClosedLog != newest {
		return nil
	}
	info, err := os.Stat(Path(l.dir, newest))
	if err != nil {
		return err
	}
	if info.Size() >= l.opts.ClosedSize {
		return nil
	}
	lost = fmt.Errorf("%s is %d bytes, shorter than the %d it had when the service last stopped: it was cut, "+
		"and the changes at its end are lost; restore it from a backup", Path(l.dir, newest), info.Size(), l.opts.ClosedSize)
	if !l.opts.Repair {
		return fmt.Errorf("%w; or start with -repair to go on without them", lost)
	}
	if err := l.opts.BeforeRepair(); err != nil {
		return err
	}
	l.logger.Warn("repair: going on with a log that was cut", "err", lost)
	return nil
}

// moveToRepair moves logs seqs into a new repair directory, after
// opts.BeforeRepair, and returns its path.
func (l *Log) moveToRepair(seqs ...uint64) (string, error) {
	if err := l.opts.BeforeRepair(); err != nil {
		return "", err
	}
	paths := make([]string, len(seqs))
	for i, seq := range seqs {
		paths[i] = Path(l.dir, seq)
	}
	return fileutil.MoveToRepair(l.dir, paths...)
}
