package durable

import (
	"sync"
	"time"

	"example.com/groupmembership/membership"
)

// keySlots serializes the keyed writes of each Idempotency-Key: a keyed
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
	held map[string]chan struct{} // closed when released
}

// take takes key's slot, waiting at most wait for the write holding it,
// and returns the func that releases it. Past wait it is
// CodeIdempotencyKeyInFlight.
func (k *keySlots) take(key string, wait time.Duration) (release func(), err error) {
	var timer *time.Timer
	for {
		k.mu.Lock()
		held := k.held[key]
		if held == nil {
			if k.held == nil {
				k.held = map[string]chan struct{}{}
			}
			ch := make(chan struct{})
			k.held[key] = ch
			k.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					k.mu.Lock()
					delete(k.held, key)
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
