// Package shards is what the sharded parts of the in-memory store share: a
// set of shards, taken in ascending index order (the order package
// memory's doc gives its locks in), and work spread over the shards on
// every core.
package shards

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// Set is a set of shard indexes, a bit each.
type Set []uint64

// NewSet returns an empty Set of indexes below n, in buf when it has room.
func NewSet(n int, buf []uint64) Set {
	words := (n + 63) / 64
	if words <= len(buf) {
		set := buf[:words]
		clear(set)
		return set
	}
	return make(Set, words)
}

// Add adds index i to s.
func (s Set) Add(i int) { s[i/64] |= 1 << (i % 64) }

// Has reports whether s holds index i.
func (s Set) Has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// Mutex is a shard's lock: a sync.RWMutex that counts the times it was
// held for writing, so that a reader can tell, without it, whether a shard
// changed since it read it.
type Mutex struct {
	sync.RWMutex
	writes atomic.Uint64
}

// Unlock lets go of m, held for writing, and counts it.
func (m *Mutex) Unlock() {
	m.writes.Add(1)
	m.RWMutex.Unlock()
}

// Lock locks the mutexes of s's indexes, mu(i) each, in ascending order:
// for reading when read.
func (s Set) Lock(mu func(i int) *Mutex, read bool) {
	for i := range s.All {
		if read {
			mu(i).RLock()
		} else {
			mu(i).Lock()
		}
	}
}

// Unlock lets go of what Lock locked.
func (s Set) Unlock(mu func(i int) *Mutex, read bool) {
	for i := range s.All {
		if read {
			mu(i).RUnlock()
		} else {
			mu(i).Unlock()
		}
	}
}

// Writes returns how many times m was held for writing. A change under m
// counts once it lets go: a reader that holds m for reading, or that read
// the same count before and after, saw none happen between.
func (m *Mutex) Writes() uint64 { return m.writes.Load() }

// All yields the indexes of s in ascending order.
func (s Set) All(yield func(int) bool) {
	for w, word := range s {
		for ; word != 0; word &= word - 1 {
			if !yield(w*64 + bits.TrailingZeros64(word)) {
				return
			}
		}
	}
}

// Parallel calls fn with each of 0 to n-1, from workers goroutines at
// once, each calling fn with its number, below workers: a caller that
// keeps something for each worker sizes it by the number it gave, read
// once (see Workers), not by GOMAXPROCS again, which the runtime may change
// meanwhile.
func Parallel(workers, n int, fn func(worker, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(w, i)
			}
		})
	}
	wg.Wait()
}

// Workers returns how many workers Parallel should have for n tasks: one
// for each core, at most n, at least one.
func Workers(n int) int { return max(1, min(runtime.GOMAXPROCS(0), n)) }
