package durable

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"example.com/groupmembership/internal/fileutil"
)

// dataFileName is the file that says what a data directory holds, beside
// its logs and snapshots: that it has held data (a directory with it and no
// log nor snapshot lost its files, and is not taken for a new one), its id
// (every log carries it, so that a log copied in from another directory is
// refused), the newest log it has had (a missing newest log is refused),
// its epoch (see membership.Store.Epoch: it is in every ETag), and, after a
// clean stop, the size its last log had (a log cut while the service was
// stopped is refused).
const dataFileName = "DATA"

// dataFile is the content of DATA.
type dataFile struct {
	id      uint64
	epoch   uint64 // 0 in a DATA written before epochs: a new one is drawn
	lastLog uint64
	// closedLog and closedSize are the last log and its size when the
	// service last stopped cleanly; closedLog is 0 while it runs.
	closedLog  uint64
	closedSize int64
}

const dataFileHeader = "This directory holds the data of a membership service. Do not delete files from it.\n"

// newRandomID returns a random id, never 0: a directory id (logs of format 1
// carry 0) or an epoch (0 asks for a new one).
func newRandomID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// readDataFile reads DATA in dir; ok is false when there is none.
func readDataFile(dir string) (df dataFile, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, dataFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return dataFile{}, false, nil
	}
	if err != nil {
		return dataFile{}, false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), " ")
		fields := strings.Fields(value)
		var perr error
		switch {
		case key == "id" && len(fields) == 1:
			df.id, perr = strconv.ParseUint(fields[0], 16, 64)
		case key == "epoch" && len(fields) == 1:
			df.epoch, perr = strconv.ParseUint(fields[0], 16, 64)
		case key == "last-log" && len(fields) == 1:
			df.lastLog, perr = strconv.ParseUint(fields[0], 10, 64)
		case key == "closed" && len(fields) == 2:
			df.closedLog, perr = strconv.ParseUint(fields[0], 10, 64)
			if perr == nil {
				df.closedSize, perr = strconv.ParseInt(fields[1], 10, 64)
			}
		}
		if perr != nil {
			return dataFile{}, false, fmt.Errorf("%s: line %q: %w", filepath.Join(dir, dataFileName), sc.Text(), perr)
		}
	}
	return df, true, nil
}

// write writes DATA in dir durably: a temporary file, synced, renamed over
// it, and the directory synced.
func (df dataFile) write(dir string) error {
	var b strings.Builder
	b.WriteString(dataFileHeader)
	fmt.Fprintf(&b, "id %016x\nepoch %016x\nlast-log %d\n", df.id, df.epoch, df.lastLog)
	if df.closedLog != 0 {
		fmt.Fprintf(&b, "closed %d %d\n", df.closedLog, df.closedSize)
	}
	return fileutil.WriteAtomic(filepath.Join(dir, dataFileName), fileutil.FileMode, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
}
