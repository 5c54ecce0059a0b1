package durable

// The mark: how far the newest log is known to be complete. A crash tears
// at most the record being written, so recovery cuts an incomplete record
// at the end of the newest log away as a torn write; but a log cut shorter
// after a crash (by hand, by a restore of part of it, by a filesystem that
// lost its end) looks the same, and would lose records that were fsynced
// and acknowledged. MARK records, a few times a second at most and never on
// the way of a change, the offset up to which the newest log was fsynced:
// a start that finds that log shorter refuses, as it refuses other damage.
// What a crash can still hide is a cut of the records written after the
// last mark: at most the last interval's.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/fileheader"
	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/membership"
)

// markFileName is the mark's file in the data directory.
const markFileName = "MARK"

// markInterval is how often, at most, the mark is written: only when the
// log has grown since the last time, so an idle store writes none.
const markInterval = 250 * time.Millisecond

// markSlotSize is the size of each of the mark's two slots, and MARK holds
// exactly two: slot i at offset i*markSlotSize. A page each, so that a
// write of one slot that a crash tears never touches the other (the kernel
// writes back whole pages, disks whole sectors of 512 or 4096 bytes). The
// file keeps its size: every write overwrites a slot in place.
const markSlotSize = 4096

// markKind starts every slot.
var markKind = fileheader.Kind{Magic: "GMMK", Name: "mark", Version: 1}

// A slot is, after markKind's header, five little-endian uint64s, the
// generation (counting up; slot generation%2 is the one it goes to), the
// directory's id, the log's sequence number, the offset, the revision,
// then a CRC-32C of all the bytes before it. The rest of the slot is zero.
const markSlotLen = fileheader.Size + 5*8 + 4

// logMark is a point in the logs: log seq is written and fsynced up to
// offset, where the state is at revision.
type logMark struct {
	seq      uint64
	offset   int64
	revision membership.Revision
}

// markSlot is what one slot of MARK holds.
type markSlot struct {
	gen   uint64
	dirID uint64
	logMark
}

func (s markSlot) encode() []byte {
	b := markKind.Append(make([]byte, 0, markSlotLen))
	for _, v := range []uint64{s.gen, s.dirID, s.seq, uint64(s.offset), uint64(s.revision)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeMarkSlot(b []byte) (markSlot, error) {
	if len(b) < markSlotLen {
		return markSlot{}, errors.New("cut short")
	}
	b = b[:markSlotLen]
	if crc32.Checksum(b[:markSlotLen-4], castagnoli) != binary.LittleEndian.Uint32(b[markSlotLen-4:]) {
		return markSlot{}, errors.New("its checksum does not match")
	}
	if _, err := markKind.Read(b); err != nil {
		return markSlot{}, err
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[fileheader.Size+8*i:]) }
	return markSlot{gen: u(0), dirID: u(1), logMark: logMark{seq: u(2), offset: int64(u(3)), revision: membership.Revision(u(4))}}, nil
}

// readMark returns the newest slot of the MARK at path that checks out. It
// returns an error that wraps fs.ErrNotExist when there is no MARK.
func readMark(path string) (markSlot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return markSlot{}, err
	}
	a, errA := decodeMarkSlot(data)
	b, errB := decodeMarkSlot(data[min(len(data), markSlotSize):])
	switch {
	case errA != nil && errB != nil:
		return markSlot{}, fmt.Errorf("neither of its slots checks out (%v; %v)", errA, errB)
	case errB != nil || errA == nil && a.gen > b.gen:
		return a, nil
	}
	return b, nil
}

// markFile is what the mark is written through: an *os.File; tests
// replace it to simulate failing or stuck disks.
type markFile interface {
	WriteAt(b []byte, off int64) (int, error)
	Sync() error
	Close() error
}

// openMarkFile opens MARK at path for writing, creating it, with its two
// slots, when it is missing or of another size.
func openMarkFile(path string) (markFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, fileMode)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && info.Size() != 2*markSlotSize {
		err = f.Truncate(2 * markSlotSize)
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = fileutil.SyncDir(filepath.Dir(path))
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// marker writes MARK. Its mutex serializes the writes (the marker
// goroutine's, the start's, a test's); nothing else waits for it.
type marker struct {
	path   string
	logger *slog.Logger

	// mu guards the fields below; it is held across a write and its fsync.
	mu   sync.Mutex
	f    markFile
	last markSlot // the slot written last, or found at the start
	// failing says that the last write failed: logged once until one
	// works again.
	failing bool

	writes, failures atomic.Uint64
}

// mark writes m into the slot after the last one and fsyncs it, unless
// the last slot written holds m already, and counts and logs what
// happened. A failure fails nothing else: the mark is advisory (see
// Store.markNow).
func (mk *marker) mark(m logMark) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.last.logMark == m && mk.last.gen != 0 {
		return
	}
	if err := mk.writeLocked(m); err != nil {
		mk.failures.Add(1)
		if !mk.failing {
			mk.logger.Error("writing MARK failed: changes are still taken, but a log cut after a crash may go unnoticed back to the last mark written",
				"file", mk.path, "err", err)
		}
		mk.failing = true
		return
	}
	mk.writes.Add(1)
	if mk.failing {
		mk.logger.Info("MARK is written again", "file", mk.path)
	}
	mk.failing = false
}

// writeLocked writes m into the slot after the last one, and fsyncs it.
// A failed write leaves last as it was, so that the next one goes to the
// same slot and the other keeps the last mark that was written whole.
func (mk *marker) writeLocked(m logMark) error {
	s := markSlot{gen: mk.last.gen + 1, dirID: mk.last.dirID, logMark: m}
	if _, err := mk.f.WriteAt(s.encode(), int64(s.gen%2)*markSlotSize); err != nil {
		return err
	}
	if err := mk.f.Sync(); err != nil {
		return err
	}
	mk.last = s
	return nil
}

func (mk *marker) close() error {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return mk.f.Close()
}

// setSynced records, for the marker, that the log being written is
// fsynced up to its size. Only the committer calls it, after each fsync
// of the log and after it switches to a new one.
func (d *Store) setSynced() {
	m := logMark{seq: d.logSeq, offset: d.logSize, revision: d.mem.LatestRevision()}
	d.syncedMu.Lock()
	d.synced = m
	d.syncedMu.Unlock()
}

func (d *Store) syncedMark() logMark {
	d.syncedMu.Lock()
	defer d.syncedMu.Unlock()
	return d.synced
}

// markLoop writes the mark, at most every opts.markEvery (from the end of
// one write to the start of the next), until the store stops.
func (d *Store) markLoop() {
	defer close(d.markStopped)
	t := time.NewTimer(d.opts.markEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			d.markNow()
			t.Reset(d.opts.markEvery)
		case <-d.stop:
			return
		}
	}
}

// markNow writes the mark when the log has grown since it was last
// written. It runs beside the committer, which never waits for it: a slow
// mark delays no change, and a failed one fails none. It is logged and
// counted instead, for the mark only narrows what a crash can hide; a
// store that refused changes for want of it would trade a detector for an
// outage, and the log itself is as durable without it.
func (d *Store) markNow() {
	d.marker.mark(d.syncedMark())
}

// readStartMark reads MARK, for checkMark. The mark is advisory: one that
// cannot be read, or is another directory's, is warned about and gone on
// without, for the start is otherwise fine; the start writes it anew. A
// directory of a version before the mark has none: nothing to say.
func (d *Store) readStartMark() {
	path := filepath.Join(d.dir, markFileName)
	s, err := readMark(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		d.logger.Warn("MARK is damaged: going on without it; a log cut before this start cannot be told from a torn write", "file", path, "err", err)
	case s.dirID != d.dataFile.id:
		d.logger.Warn("MARK is another data directory's: going on without it", "file", path, "its_id", fmt.Sprintf("%016x", s.dirID))
		d.startMark.gen = s.gen
	default:
		d.startMark, d.startMarkOK = s, true
	}
}

// checkMark refuses log seq, the newest, found size bytes long, when the
// mark says it was fsynced further: it was cut after its records were
// acknowledged. With Repair it goes on, and says whether the log was cut,
// so that replay keeps an incomplete record at its end aside rather than
// drop it as a torn write.
func (d *Store) checkMark(seq uint64, size int64) (cut bool, err error) {
	m := d.startMark
	if !d.startMarkOK || m.seq != seq || size >= m.offset {
		return false, nil // none, of an older log (a snapshot started a new one), or kept
	}
	lost := fmt.Errorf("%s ends at offset %d, but %s says it was written and fsynced up to offset %d (revision %d): "+
		"it was cut after its changes were acknowledged", logPath(d.dir, seq), size, markFileName, m.offset, m.revision)
	if !d.opts.Repair {
		return false, fmt.Errorf("%w; refusing to start, to lose no acknowledged change. Restore the directory from a backup, "+
			"or start with -repair to go on with what the log holds, without the changes after offset %d "+
			"(an incomplete record at its end is moved into a repair directory)", lost, size)
	}
	if err := d.renewEpoch(); err != nil {
		return false, err
	}
	d.logger.Warn("repair: going on with a log that was cut after a crash: the changes after its end are lost", "err", lost)
	return true, nil
}

// startMarker opens MARK and writes in it the log as recovered, before any
// change is taken: that resets a mark that said more (after a repair), or
// another directory's, or a damaged one.
func (d *Store) startMarker() error {
	path := filepath.Join(d.dir, markFileName)
	f, err := d.opts.openMark(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	d.marker = &marker{path: path, logger: d.logger, f: f, last: markSlot{gen: d.startMark.gen, dirID: d.dataFile.id}}
	d.setSynced()
	d.marker.mu.Lock()
	defer d.marker.mu.Unlock()
	if err := d.marker.writeLocked(d.syncedMark()); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	d.marker.writes.Add(1)
	return nil
}
