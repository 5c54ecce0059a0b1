package transitive

import (
	"sync"

	"example.com/groupmembership/membership"
)

// A closure's key is a revision that moves whenever any of its groups'
// members, their ends or the nestings between them change, and with
// nothing else (a nickname does not move it): the latest of the changes
// of the nestings below the root (closure.down), the present groups'
// revisions and the latest deletion of each absent one (a group absent
// now that had members when the answer was read last moves it so). With
// no group present, the answer is empty, as it was at revision 0: the key
// is 0. Reading it walks the closure. The key's part from each shard is kept
// instead (memo), with the count of changes of the shard it was read at
// (Store.ShardWrites): a read of the key walks again the groups of the
// shards written since, no others. A closure is of one state of the
// nesting, so its memo is too.

// memo keeps, for each shard of a closure, its part of the closure's key.
type memo struct {
	// mu guards shards; it is taken with no lock after it.
	mu     sync.Mutex
	shards []shardKey // by shard index; nil until the first read
}

// shardKey is a shard's part of a closure's key: the latest revision of
// the closure's groups in it (of those present, or of the latest deletion
// of those absent), whether one is present, and the count of the shard's
// changes it was read at.
type shardKey struct {
	writes  uint64
	key     membership.Revision
	present bool
	known   bool
}

// membersKey returns c's key as the shards are now, from
// the memo and the groups of the shards written since it was kept. The
// caller holds the nesting, and every shard of c when held; otherwise
// membersKey holds each shard it reads, one at a time: each part is of
// its shard as of when it was read, and a change of one, which gives it
// a revision greater than any key read before, moves the key unless it
// came after that shard was read.
func (r *Reader) membersKey(c *closure, held bool) membership.Revision {
	key, present := c.down, false
	var staleBuf [8]int
	stale := staleBuf[:0]
	c.memo.mu.Lock()
	if c.memo.shards == nil {
		c.memo.shards = make([]shardKey, r.s.Shards())
	}
	for i := range c.lock.All {
		if sk := c.memo.shards[i]; sk.known && sk.writes == r.s.ShardWrites(i) {
			key, present = max(key, sk.key), present || sk.present
		} else {
			stale = append(stale, i)
		}
	}
	c.memo.mu.Unlock()
	for _, i := range stale {
		if !held {
			r.s.RLockShard(i)
		}
		sk := r.shardKey(c, i)
		if !held {
			r.s.RUnlockShard(i)
		}
		key, present = max(key, sk.key), present || sk.present
		c.memo.mu.Lock()
		c.memo.shards[i] = sk
		c.memo.mu.Unlock()
	}
	if !present {
		return 0
	}
	return key
}

// shardKey reads shard i's part of c's key. The caller holds the shard.
func (r *Reader) shardKey(c *closure, i int) shardKey {
	sk := shardKey{writes: r.s.ShardWrites(i), known: true}
	for _, j := range c.byShard[i] {
		switch g := r.s.Group(i, c.ids[j]); {
		case g != nil:
			sk.key, sk.present = max(sk.key, g.Revision), true
		case c.root != nil:
			sk.key = max(sk.key, c.nodes[j].Dropped())
		}
	}
	return sk
}
