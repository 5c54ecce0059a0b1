package httpapi

import (
	"net/http"
	"strconv"
	"sync"

	"example.com/groupmembership/membership"
)

// handleBackup serves GET /backup: a consistent copy of the whole state at
// one revision (in X-Revision), as a file that -restore reads. Writes wait
// only while the state is copied in memory; the copy is encoded as it is
// sent. One backup at a time: the copy holds about the memory of the
// memberships, and another backup is answered 503 until it is sent.
func handleBackup(backup func() Backup, backups *sync.Mutex) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if backup == nil {
			writeError(w, r, membership.Errorf(membership.CodeUnavailable, "this store takes no backups"))
			return
		}
		if !backups.TryLock() {
			writeError(w, r, membership.Errorf(membership.CodeUnavailable, "a backup is being taken already, and they are taken one at a time: try again when it is done"))
			return
		}
		defer backups.Unlock()
		b := backup()
		rev := strconv.FormatUint(uint64(b.Revision()), 10)
		h := w.Header()
		h["Content-Type"] = []string{"application/octet-stream"}
		h["Content-Disposition"] = []string{`attachment; filename="membership-` + rev + `.backup"`}
		h["X-Revision"] = []string{rev}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		if _, err := b.WriteTo(w); err != nil {
			markClientClosed(w) // the header is sent: all that is left is to stop
		}
	})
}
