package lists

import (
	"bytes"
	"context"
	"iter"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// Replies are bounded in memory: every reply body is taken from one budget
// before it is allocated, and given back once written, so that clients that
// do not read what they asked for (the write timeout cuts them off) cannot
// make the service hold more than the budget. A group's whole list is
// encoded once per revision and shared: by the cache, by every reply that
// sends it, and by every reply of a suffix of it (after=UID without limit),
// so that many readers of one large group cost its list once.

// EncodedList is a group's whole member list at one revision, encoded.
type EncodedList struct {
	groupID  string
	revision membership.Revision
	Body     []byte
	total    int // the group's size
	// The values of the reply's ETag, X-Total-Count and Content-Length
	// headers, made once for all its readers. Nothing changes them: a
	// header map holds them.
	ETag, TotalField, LengthField []string
	// marks hold every encode.MarkEvery-th member's uid and the offset of its
	// object in body, for finding where a suffix starts.
	marks []encode.ListMark
	// lease is what the list took from the replies budget while replies
	// send it; refs counts those replies. Both are guarded by
	// EncodedLists.mu.
	lease budget.Lease
	refs  int
}

// Suffix returns the list of the members with uids above uid: a JSON array
// whose "[" is the first part and the rest of which is the second, both
// sharing body.
func (e *EncodedList) Suffix(uid membership.UID) (open, rest []byte) {
	i := sort.Search(len(e.marks), func(i int) bool { return e.marks[i].UID > uid })
	off := 1 // the first object, after "["
	if i > 0 {
		off = e.marks[i-1].Offset
	}
	end := len(e.Body) - 1 // the closing "]"
	for off < end {
		if objectUID(e.Body[off:]) > uid {
			return e.Body[:1], e.Body[off:]
		}
		// No string in the body holds `,{"uid":`: a quote inside a string is
		// escaped. So the next one starts the next object.
		next := bytes.Index(e.Body[off+1:], nextObject)
		if next < 0 {
			break
		}
		off += 1 + next + 1
	}
	return e.Body[:1], e.Body[end:]
}

var nextObject = []byte(`,{"uid":`)

// objectUID reads the uid of the member object b starts with.
func objectUID(b []byte) membership.UID {
	var n membership.UID
	for _, c := range b[len(encode.UIDPrefix):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + membership.UID(c-'0')
	}
	return n
}

// EncodedLists finds, builds and shares the encoded member lists, and
// accounts for the memory of every reply in the replies budget.
type EncodedLists struct {
	Replies *budget.Bytes

	// mu guards everything below, the cache included, and the refs, held
	// and sending of every EncodedList.
	mu    sync.Mutex
	cache *Cache
	// sending holds, by group id, the newest list that replies are sending
	// and the cache does not hold (it is too large, or was dropped).
	sending map[string]*EncodedList
	// building holds, by group id, the list being built now: readers that
	// come meanwhile wait for it rather than build their own.
	building map[string]*listBuild
}

// listBuild is one encoding of a group's list in progress; done is closed
// when e or err is set.
type listBuild struct {
	done chan struct{}
	e    *EncodedList
	err  error
}

func NewEncodedLists(cache *Cache, replies *budget.Bytes) *EncodedLists {
	return &EncodedLists{cache: cache, Replies: replies, sending: make(map[string]*EncodedList), building: make(map[string]*listBuild)}
}

// ErrRepliesBusy refuses a reply when the replies budget is spent.
func ErrRepliesBusy() error {
	return membership.Errorf(membership.CodeUnavailable,
		"too many large replies are being sent at once: try again later")
}

// Whole returns the group's whole list at revision or a later one, held for
// the caller, who must release it: the list replies are sending, or the
// cache's, or one built now. Errors: those of svc.ListMembers, and
// CodeUnavailable when the replies budget has no room for it.
func (l *EncodedLists) Whole(ctx context.Context, svc *membership.Service, groupID string, revision membership.Revision) (*EncodedList, error) {
	for {
		l.mu.Lock()
		e, ok := l.sending[groupID]
		if !ok || e.revision != revision {
			e, ok = l.cache.get(groupID, revision)
		}
		if ok {
			held := l.holdLocked(e)
			l.mu.Unlock()
			if !held {
				return nil, ErrRepliesBusy()
			}
			return e, nil
		}
		b := l.building[groupID]
		if b == nil {
			b = &listBuild{done: make(chan struct{})}
			l.building[groupID] = b
			size := l.lastSizeLocked(groupID)
			l.mu.Unlock()
			return l.build(ctx, svc, groupID, size, b)
		}
		l.mu.Unlock()
		// Another reader builds the list: its state is at least as new as
		// the one this reader must show once it is done, unless it began
		// before the revision this reader saw; then look again.
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, membership.Errorf(membership.CodeUnavailable, "the request ended while its list was being built")
		}
		if b.err != nil && membership.ErrorCode(b.err) == membership.CodeUnavailable {
			return nil, b.err
		}
		if b.err == nil && b.e.revision >= revision && l.tryHold(b.e) {
			return b.e, nil
		}
	}
}

// build encodes the group's list, for whole, which made b and registered
// it, and ends b for the readers that waited. lastSize is the cost of the
// group's newest encoding, of any revision (0: none).
func (l *EncodedLists) build(ctx context.Context, svc *membership.Service, groupID string, lastSize int64, b *listBuild) (e *EncodedList, err error) {
	defer func() {
		l.mu.Lock()
		delete(l.building, groupID)
		if e != nil {
			l.cache.put(e)
			if old, ok := l.sending[e.groupID]; !l.cache.holds(e) && (!ok || old.revision < e.revision) {
				l.sending[e.groupID] = e
			}
		}
		l.mu.Unlock()
		b.e, b.err = e, err
		close(b.done)
	}()
	// Refuse before listing when the last encoding of the group does not
	// fit: measuring a large group costs time under its lock.
	if lastSize > 0 && !l.Replies.Has(lastSize) {
		l.Replies.Refuse()
		return nil, ErrRepliesBusy()
	}
	// The list outlives the request: its id must not share the request's
	// memory.
	e = &EncodedList{groupID: strings.Clone(groupID)}
	busy := false
	rev, err := svc.ListMembers(ctx, groupID, membership.ListOptions{}, func(total int, members iter.Seq[membership.Member]) {
		size, n := encode.MembersJSONLen(members)
		marks := n/encode.MarkEvery + 1
		var ok bool
		if e.lease, ok = l.Replies.Take(int64(size+len(groupID)+marks*int(unsafe.Sizeof(encode.ListMark{}))) + entryOverhead); !ok {
			busy = true
			return
		}
		e.total = total
		e.marks = make([]encode.ListMark, 0, marks)
		e.Body = encode.AppendMembers(make([]byte, 0, size), members, &e.marks)
	})
	if err != nil || busy {
		if err == nil {
			err = ErrRepliesBusy()
		}
		e.lease.Release()
		return nil, err
	}
	e.revision, e.ETag, e.refs = rev, encode.ETag(svc.Epoch(), rev), 1
	e.TotalField, e.LengthField = []string{strconv.Itoa(e.total)}, []string{strconv.Itoa(len(e.Body))}
	return e, nil
}

// lastSizeLocked returns the cost of the newest encoding of the group that
// is sent or cached, of any revision; 0 when there is none. The caller holds
// mu.
func (l *EncodedLists) lastSizeLocked(groupID string) int64 {
	if e, ok := l.sending[groupID]; ok {
		return e.cost()
	}
	return l.cache.lastSize(groupID)
}

// tryHold holds e, which another reader built, for one more reply, unless
// all its replies are done (then its memory went back, and the caller looks
// again).
func (l *EncodedLists) tryHold(e *EncodedList) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs == 0 {
		return false
	}
	e.refs++
	return true
}

// holdLocked holds e for one more reply, taking its memory from the budget
// for the first. It reports false when the budget has no room. The caller
// holds mu.
func (l *EncodedLists) holdLocked(e *EncodedList) bool {
	if e.refs == 0 {
		lease, ok := l.Replies.Take(e.cost())
		if !ok {
			return false
		}
		e.lease = lease
	}
	e.refs++
	return true
}

// CacheBytes returns what the cache holds now.
func (l *EncodedLists) CacheBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cache.bytes()
}

// Release ends one reply's hold of e; the last gives its memory back.
func (l *EncodedLists) Release(e *EncodedList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.refs--
	if e.refs > 0 {
		return
	}
	e.lease.Release()
	if l.sending[e.groupID] == e {
		delete(l.sending, e.groupID)
	}
}

// EncodeBounded builds a reply body of size bytes with fill, after taking
// its memory from the replies budget; the caller releases the lease once
// the body is written. Errors: CodeUnavailable when the budget has no room.
func EncodeBounded(replies *budget.Bytes, size int, fill func([]byte) []byte) ([]byte, budget.Lease, error) {
	lease, ok := replies.Take(int64(size))
	if !ok {
		return nil, lease, ErrRepliesBusy()
	}
	return fill(make([]byte, 0, size)), lease, nil
}

// CacheLimit returns the most bytes the cache holds, for /metrics.
func (l *EncodedLists) CacheLimit() int64 { return l.cache.maxBytes }
