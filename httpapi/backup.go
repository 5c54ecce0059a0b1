package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/membership"
)

// Backup is a consistent copy of a store's whole state at one revision, as
// a file that -restore reads.
type Backup interface {
	// Revision returns the revision of the state the backup holds.
	Revision() membership.Revision
	// WriteTo writes the backup's file to w.
	io.WriterTo
}

// Backups are taken one at a time, and spaced: writes wait while a backup
// copies the state, so the next may start only after nine times as long as
// that copy took has passed, which leaves writes at least 90 % of the time
// however often clients ask.
type backups struct {
	mu     sync.Mutex // held while a backup is taken and sent
	nextAt time.Time  // guarded by mu
	// now is the clock: time.Now, but in tests.
	now func() time.Time
}

// backupWriteTimeout is how long a backup may take to send: longer than the
// server's write timeout, for a large state over a slow link. A client that
// does not read holds the one backup, and its copy, at most this long.
const backupWriteTimeout = 10 * time.Minute

// spacing is how long after a copy that took took the next may start.
func spacing(took time.Duration) time.Duration { return 9 * took }

// handleBackup serves GET /backup: a consistent copy of the whole state at
// one revision (in X-Revision), as a file that -restore reads. Writes wait
// only while the state is copied in memory; the copy is encoded as it is
// sent. HEAD answers the headers without a copy: X-Revision is then the
// latest revision.
func handleBackup(svc *membership.Service, backup func() Backup, b *backups) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if backup == nil {
			middleware.WriteError(w, r, membership.Errorf(membership.CodeUnavailable, "this store takes no backups"))
			return
		}
		if r.Method == http.MethodHead {
			_, latest, err := svc.Changes(r.Context(), membership.ChangeOptions{Limit: 1})
			if err != nil {
				middleware.WriteError(w, r, err)
				return
			}
			writeBackupHeader(w, latest)
			return
		}
		if !b.mu.TryLock() {
			middleware.WriteError(w, r, membership.Errorf(membership.CodeUnavailable, "a backup is being taken already, and they are taken one at a time: try again when it is done"))
			return
		}
		defer b.mu.Unlock()
		now := time.Now
		if b.now != nil {
			now = b.now
		}
		if wait := b.nextAt.Sub(now()); wait > 0 {
			middleware.WriteError(w, r, membership.Errorf(membership.CodeUnavailable, "backups are spaced, so that writes go on between them: the next may start in %s", wait.Round(time.Millisecond)))
			return
		}
		start := now()
		copied := backup()
		end := now()
		b.nextAt = end.Add(spacing(end.Sub(start)))
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(backupWriteTimeout))
		writeBackupHeader(w, copied.Revision())
		if _, err := copied.WriteTo(w); err != nil {
			middleware.MarkClientClosed(w) // the header is sent: all that is left is to stop
		}
	})
}

func writeBackupHeader(w http.ResponseWriter, rev membership.Revision) {
	revision := strconv.FormatUint(uint64(rev), 10)
	h := w.Header()
	h["Content-Type"] = []string{"application/octet-stream"}
	h["Content-Disposition"] = []string{`attachment; filename="membership-` + revision + `.backup"`}
	h["X-Revision"] = []string{revision}
	w.WriteHeader(http.StatusOK)
}
