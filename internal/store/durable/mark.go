package durable

import "time"

// markInterval is how often, at most, MARK is written (wal.Log.Mark): only
// when the log has grown since the last time, so an idle store writes
// none.
const markInterval = 250 * time.Millisecond

// markLoop writes the mark, at most every opts.markEvery (from the end of
// one write to the start of the next), until the store stops. It runs
// beside the committer, which never waits for it.
func (d *Store) markLoop() {
	defer close(d.markStopped)
	t := time.NewTimer(d.opts.markEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			d.log.Mark()
			t.Reset(d.opts.markEvery)
		case <-d.stop:
			return
		}
	}
}
