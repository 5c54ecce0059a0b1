package wal

// The mark: how far the newest log is known to be complete. A crash tears
// at most the record being written, so Open cuts an incomplete record at
// the end of the newest log away as a torn write; but a log cut shorter
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

	"example.com/groupmembership/internal/fileheader"
	"example.com/groupmembership/internal/fileutil"
)

// markFileName is the mark's file in the data directory.
const markFileName = "MARK"

// MarkSlotSize is the size of each of the mark's two slots, and MARK holds
// exactly two: slot i at offset i*MarkSlotSize. A page each, so that a
// write of one slot that a crash tears never touches the other (the kernel
// writes back whole pages, disks whole sectors of 512 or 4096 bytes). The
// file keeps its size: every write overwrites a slot in place.
const MarkSlotSize = 4096

// markKind starts every slot.
var markKind = fileheader.Kind{Magic: "GMMK", Name: "mark", Version: 1}

// A slot is, after markKind's header, five little-endian uint64s, the
// generation (counting up; slot generation%2 is the one it goes to), the
// directory's id, the log's sequence number, the offset, the revision,
// then a CRC-32C of all the bytes before it. The rest of the slot is zero.
const markSlotLen = fileheader.Size + 5*8 + 4

// Mark is a point in the logs: log Seq is written and fsynced up to
// Offset, where the state is at Revision.
type Mark struct {
	Seq      uint64
	Offset   int64
	Revision uint64
}

// MarkSlot is what one slot of MARK holds: a mark, the slot's generation,
// and the directory's id.
type MarkSlot struct {
	Gen   uint64
	DirID uint64
	Mark
}

func (s MarkSlot) encode() []byte {
	b := markKind.Append(make([]byte, 0, markSlotLen))
	for _, v := range []uint64{s.Gen, s.DirID, s.Seq, uint64(s.Offset), s.Revision} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeMarkSlot(b []byte) (MarkSlot, error) {
	if len(b) < markSlotLen {
		return MarkSlot{}, errors.New("cut short")
	}
	b = b[:markSlotLen]
	if crc32.Checksum(b[:markSlotLen-4], castagnoli) != binary.LittleEndian.Uint32(b[markSlotLen-4:]) {
		return MarkSlot{}, errors.New("its checksum does not match")
	}
	if _, err := markKind.Read(b); err != nil {
		return MarkSlot{}, err
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[fileheader.Size+8*i:]) }
	return MarkSlot{Gen: u(0), DirID: u(1), Mark: Mark{Seq: u(2), Offset: int64(u(3)), Revision: u(4)}}, nil
}

// ReadMark returns the newest slot of the MARK of dir that checks out. It
// returns an error that wraps fs.ErrNotExist when there is no MARK.
func ReadMark(dir string) (MarkSlot, error) {
	data, err := os.ReadFile(filepath.Join(dir, markFileName))
	if err != nil {
		return MarkSlot{}, err
	}
	a, errA := decodeMarkSlot(data)
	b, errB := decodeMarkSlot(data[min(len(data), MarkSlotSize):])
	switch {
	case errA != nil && errB != nil:
		return MarkSlot{}, fmt.Errorf("neither of its slots checks out (%v; %v)", errA, errB)
	case errB != nil || errA == nil && a.Gen > b.Gen:
		return a, nil
	}
	return b, nil
}

// MarkFile is what the mark is written through: an *os.File; tests
// replace it to simulate failing or stuck disks.
type MarkFile interface {
	WriteAt(b []byte, off int64) (int, error)
	Sync() error
	Close() error
}

// OpenMarkFile opens MARK at path for writing, creating it, with its two
// slots, when it is missing or of another size.
func OpenMarkFile(path string) (MarkFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, fileutil.FileMode)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && info.Size() != 2*MarkSlotSize {
		err = f.Truncate(2 * MarkSlotSize)
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

// marker writes MARK. Its mutex serializes the writes (the owner's
// goroutine's, the start's, a test's); nothing else waits for it.
type marker struct {
	path   string
	logger *slog.Logger

	// mu guards the fields below; it is held across a write and its fsync.
	mu   sync.Mutex
	f    MarkFile
	last MarkSlot // the slot written last, or found at the start
	// failing says that the last write failed: logged once until one
	// works again.
	failing bool

	writes, failures atomic.Uint64
}

// mark writes m into the slot after the last one and fsyncs it, unless
// the last slot written holds m already, and counts and logs what
// happened. A failure fails nothing else: the mark is advisory (see
// Log.Mark).
func (mk *marker) mark(m Mark) {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.last.Mark == m && mk.last.Gen != 0 {
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
func (mk *marker) writeLocked(m Mark) error {
	s := MarkSlot{Gen: mk.last.Gen + 1, DirID: mk.last.DirID, Mark: m}
	if _, err := mk.f.WriteAt(s.encode(), int64(s.Gen%2)*MarkSlotSize); err != nil {
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

// SetSynced records, for MARK, that the log is fsynced up to its end,
// where the state is at revision. Its owner calls it after each Save, once
// it has applied what it saved, from the goroutine that saves.
func (l *Log) SetSynced(revision uint64) {
	l.synced.Store(&Mark{Seq: l.seq, Offset: l.size, Revision: revision})
}

// Mark writes MARK when the log has grown since it was last written. Its
// owner calls it every so often (a few times a second at most), from any
// goroutine: it runs beside Save, which never waits for it, so a slow
// mark delays no change, and a failed one fails none. It is logged and
// counted instead, for the mark only narrows what a crash can hide; a
// store that refused changes for want of it would trade a detector for an
// outage, and the log itself is as durable without it.
func (l *Log) Mark() {
	l.marker.mark(*l.synced.Load())
}

// StartMark is what MARK held at the start, as ReadStartMark found it.
type StartMark struct {
	slot MarkSlot
	// ok says that the slot checked out and is this directory's, and so
	// is checked against the newest log.
	ok bool
}

// ReadStartMark reads the MARK of dir as the start finds it, for Open.
// The mark is advisory: one that cannot be read, or is another
// directory's (dirID is this one's), is warned about and gone on without,
// for the start is otherwise fine; Open writes it anew. A directory of a
// version before the mark has none: nothing to say.
func ReadStartMark(dir string, dirID uint64, logger *slog.Logger) StartMark {
	path := filepath.Join(dir, markFileName)
	s, err := ReadMark(dir)
	var start StartMark
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		logger.Warn("MARK is damaged: going on without it; a log cut before this start cannot be told from a torn write", "file", path, "err", err)
	case s.DirID != dirID:
		logger.Warn("MARK is another data directory's: going on without it", "file", path, "its_id", fmt.Sprintf("%016x", s.DirID))
		start.slot.Gen = s.Gen
	default:
		start.slot, start.ok = s, true
	}
	return start
}

// checkMark refuses log seq, the newest, found size bytes long, when the
// mark says it was fsynced further: it was cut after its records were
// acknowledged. With Repair it goes on, and says whether the log was cut,
// so that replay keeps an incomplete record at its end aside rather than
// drop it as a torn write.
func (l *Log) checkMark(seq uint64, size int64) (cut bool, err error) {
	m := l.opts.Mark.slot
	if !l.opts.Mark.ok || m.Seq != seq || size >= m.Offset {
		return false, nil // none, of an older log (a snapshot started a new one), or kept
	}
	lost := fmt.Errorf("%s ends at offset %d, but %s says it was written and fsynced up to offset %d (revision %d): "+
		"it was cut after its changes were acknowledged", Path(l.dir, seq), size, markFileName, m.Offset, m.Revision)
	if !l.opts.Repair {
		return false, fmt.Errorf("%w; refusing to start, to lose no acknowledged change. Restore the directory from a backup, "+
			"or start with -repair to go on with what the log holds, without the changes after offset %d "+
			"(an incomplete record at its end is moved into a repair directory)", lost, size)
	}
	if err := l.opts.BeforeRepair(); err != nil {
		return false, err
	}
	l.logger.Warn("repair: going on with a log that was cut after a crash: the changes after its end are lost", "err", lost)
	return true, nil
}

// startMarker opens MARK and writes in it the log as recovered, before any
// change is taken: that resets a mark that said more (after a repair), or
// another directory's, or a damaged one.
func (l *Log) startMarker() error {
	path := filepath.Join(l.dir, markFileName)
	f, err := l.opts.OpenMark(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	l.marker = &marker{path: path, logger: l.logger, f: f, last: MarkSlot{Gen: l.opts.Mark.slot.Gen, DirID: l.opts.DirID}}
	l.SetSynced(l.opts.Revision())
	l.marker.mu.Lock()
	defer l.marker.mu.Unlock()
	if err := l.marker.writeLocked(*l.synced.Load()); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	l.marker.writes.Add(1)
	return nil
}
