// Package budget holds Bytes, a bound on the memory that many requests share:
// each takes a Lease of what it holds before it allocates it, and releases
// the lease when it lets the memory go. A request that finds the budget spent is refused at once
// rather than waiting, so that no client can make the service hold more.
package budget

import "sync/atomic"

// Bytes is a budget of bytes shared by concurrent users. The zero value has
// no room; use New.
type Bytes struct {
	limit   int64
	used    atomic.Int64
	refused atomic.Uint64
}

// New returns a budget of limit bytes.
func New(limit int64) *Bytes {
	return &Bytes{limit: limit}
}

// tryTake takes n bytes and reports true when they fit, and otherwise takes
// nothing and reports false. When nothing is taken, n is taken even over
// the limit: a single request larger than the whole budget is served alone
// rather than never.
func (b *Bytes) tryTake(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit && used != 0 {
			b.refused.Add(1)
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Refuse counts a request refused without a take: the caller knew that it
// would not fit.
func (b *Bytes) Refuse() { b.refused.Add(1) }

// give gives back n bytes taken before.
func (b *Bytes) give(n int64) {
	b.used.Add(-n)
}

// Has reports whether a take of n bytes would fit now.
func (b *Bytes) Has(n int64) bool {
	used := b.used.Load()
	return used == 0 || used+n <= b.limit
}

// Limit returns the budget's size.
func (b *Bytes) Limit() int64 { return b.limit }

// Used returns the bytes taken now.
func (b *Bytes) Used() int64 { return b.used.Load() }

// Refused returns how many takes were refused since New.
func (b *Bytes) Refused() uint64 { return b.refused.Load() }

// Lease is memory taken from a budget, given back by Release: take it and
// defer its Release in one place, so that no error path can forget. It
// may grow. The zero Lease holds nothing. A Lease is not safe for
// concurrent use.
type Lease struct {
	b *Bytes
	n int64
}

// Take takes n bytes as tryTake does, and returns their lease and true, or
// a lease of nothing and false.
func (b *Bytes) Take(n int64) (Lease, bool) {
	if !b.tryTake(n) {
		return Lease{b: b}, false
	}
	return Lease{b: b, n: n}, true
}

// Lease returns a lease of nothing on b, to Grow.
func (b *Bytes) Lease() Lease { return Lease{b: b} }

// Grow takes n more bytes into the lease and reports true when they fit;
// otherwise it takes nothing more and reports false.
func (l *Lease) Grow(n int64) bool {
	if !l.b.tryTake(n) {
		return false
	}
	l.n += n
	return true
}

// Resize gives back what the lease holds and takes n bytes in one take, so
// that a lease alone may hold more than the whole budget, as a take alone
// may. It reports false, holding nothing, when they do not fit.
func (l *Lease) Resize(n int64) bool {
	l.Release()
	if !l.b.tryTake(n) {
		return false
	}
	l.n = n
	return true
}

// Release gives back what the lease holds. Releasing again gives nothing.
func (l *Lease) Release() {
	if l.n != 0 {
		l.b.give(l.n)
		l.n = 0
	}
}

// Held returns the bytes the lease holds.
func (l *Lease) Held() int64 { return l.n }
