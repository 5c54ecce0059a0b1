package memory

import (
	"runtime"
	"strings"
	"time"

	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/snap"
)

// waitForGoroutineIn waits until the stack of a goroutine names every one
// of funcs, and says whether one did within a minute.
func waitForGoroutineIn(funcs ...string) bool {
	return waitUntil(func() bool { return goroutineIn(funcs...) })
}

// waitUntil waits until cond holds, and says whether it did within a
// minute.
func waitUntil(cond func() bool) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		runtime.Gosched()
	}
	return false
}

// goroutineIn reports whether the stack of a goroutine names every one of
// funcs.
func goroutineIn(funcs ...string) bool {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		if containsAll(g, funcs) {
			return true
		}
	}
	return false
}

func containsAll(stack string, funcs []string) bool {
	for _, f := range funcs {
		if !strings.Contains(stack, f) {
			return false
		}
	}
	return true
}

// Import loads st into m, which must be empty and not yet shared, but for
// the nicknames of users in no group. It builds every index in bulk: each
// group's chunks directly, and the reverse index from all pairs sorted at
// once, rather than one insert at a time.
func (m *Store) Import(st *snap.State) {
	l := m.Loader()
	for _, g := range st.Groups {
		_ = l.Group(g) // never fails
	}
	l.Finish(st)
}

// twins returns two empty stores of opts that number their groups alike:
// the same seed spreads the same ids over the same shards.
func twins(opts Options) (*Store, *Store) {
	a, b := NewWith(opts), NewWith(opts)
	b.seed = a.seed
	b.setTables(group.NewTables(len(b.shards), b.seed, 0))
	return a, b
}
