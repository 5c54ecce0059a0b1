package main

import (
	"fmt"
	"syscall"

	"example.com/groupmembership/bench/loadtest"
)

// What a run needs, per membership and besides, from the figures of runs
// of the harness (bench/README.md has them). The bounds are above what was
// measured, so that a run that starts has room to finish.
const (
	// peakBytesPerMembership bounds the large service's peak resident
	// memory: its indexes (about 16 B a membership), and, while it writes
	// a snapshot, the copy of the state it exports (8 B a uid) and the
	// snapshot it reads back to check it (8 B a uid more), or, while it
	// restarts, the snapshot it reads and the index it builds from it,
	// with the collector's room on all of it (GOGC=50). The full runs of
	// bench/README.md peaked at 42.2 and 44.4 B a membership while loading
	// and 46.5 and 56.6 B while restarting.
	peakBytesPerMembership = 64
	// snapshotBytesPerMembership bounds a snapshot: each uid is the
	// difference from the one before it in its group, a varint of at most
	// 4 bytes for uids up to 2^28 (the full run's took 1.94 B a
	// membership). The data directory holds at most three
	// (the one before the newest, the newest, and the next being written)
	// and three logs of -snapshot-bytes (64 MiB).
	snapshotBytesPerMembership = 4
	logBytes                   = 3 * 64 << 20
	// The rest: the harness, wrk, the small service, and room for others.
	memoryHeadroom = 1 << 30
	// The services' own logs: every request of the load and of wrk is a
	// line of about 150 bytes, a few million lines.
	diskHeadroom = 2 << 30
)

// needs is what a run of memberships memberships needs.
type needs struct {
	memory, disk int64
}

func needsFor(memberships int64) needs {
	return needs{
		memory: peakBytesPerMembership*memberships + memoryHeadroom,
		disk:   3*snapshotBytesPerMembership*memberships + logBytes + diskHeadroom,
	}
}

// have is what the machine has: MemAvailable, and the free space of the
// filesystem of the temporary directory, and whether that is in memory
// (tmpfs), where the files take memory too.
type have struct {
	memory, disk int64
	tmpfs        bool
}

func haveFor(dir string) (have, error) {
	var h have
	var err error
	if h.memory, err = loadtest.ProcBytes("/proc/meminfo", "MemAvailable"); err != nil {
		return h, err
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return h, err
	}
	h.disk = int64(fs.Bavail) * fs.Bsize
	const tmpfsMagic = 0x01021994
	h.tmpfs = fs.Type == tmpfsMagic
	return h, nil
}

// check returns an error, naming the flags that shrink the run, when h
// falls short of n.
func (n needs) check(h have, dir string) error {
	memory := n.memory
	if h.tmpfs {
		memory += n.disk // the data directory is in memory too
	}
	shrink := "shrink the run with -groups (or -max-group), or free some"
	if h.memory < memory {
		return fmt.Errorf("needs %s of memory, and MemAvailable is %s: %s", gib(memory), gib(h.memory), shrink)
	}
	if h.disk < n.disk {
		return fmt.Errorf("needs %s of disk in %s, which has %s free: %s, or set TMPDIR to a larger filesystem", gib(n.disk), dir, gib(h.disk), shrink)
	}
	return nil
}

func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }
