package durable

import (
	"sync"
	"time"

	"example.com/groupmembership/membership"
)

// keySlots serializes the keyed writes of each Idempotency-Key of each
// principal (a key is its principal's own: membership.Idempotency): a keyed
// write holds its key's slot from before it asks memory whether it repeats
// one remembered until the committer has decided its record (applied or
// refused it), even when its caller stopped waiting. So the log never
// holds a record of a key written while another of the key was still in
// flight: every keyed record is a first application, applied live and on
// every replay alike (memory.Store.ApplyLogged), whatever the bounds of
// the key table then and now. A repeat that comes while the first is in
// flight waits for it, and then finds its key remembered.
type keySlots struct {
	mu   sync.Mutex
	held map[slot]chan struct{} // closed when released
}

// slot names a principal's key.
type slot struct{ principal, key string }

// take takes the slot of principal's key, waiting at most wait for the
// write holding it, and returns the func that releases it. Past wait it
// is CodeIdempotencyKeyInFlight.
func (k *keySlots) take(principal, key string, wait time.Duration) (release func(), err error) {
	var timer *time.Timer
	s := slot{principal, key}
	for {
		k.mu.Lock()
		held := k.held[s]
		if held == nil {
			if k.held == nil {
				k.held = map[slot]chan struct{}{}
			}
			ch := make(chan struct{})
			k.held[s] = ch
			k.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					k.mu.Lock()
					delete(k.held, s)
					k.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		k.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-held:
		case <-timer.C:
			return nil, membership.IdempotencyKeyInFlight()
		}
	}
}
