package nesting

import "maps"

// The ancestors of a node are shared along one of its parents, up: they
// are up, every node above up, and extra, those it has from its other
// parents that are not above up. A group in one group, below a hub in
// thousands, keeps no set of its own: the nodes below a hub hold its
// ancestors once, in the hub, not a copy each. Whether a node is above
// another is then a lookup in extra of each node from it up the chain of
// ups, which is as long as the nesting is deep.
//
// Every node's extra holds nothing up holds (its chain of ups and their
// extras): each ancestor is held once along the chain, so that Ancestors
// yields each once. Set and Remove keep it so.

// IsAbove reports whether above is a group above n (n nil: no nesting).
func (n *Node) IsAbove(above *Node) bool {
	if above == nil {
		return false
	}
	for x := n; x != nil; x = x.up {
		if x.up == above {
			return true
		}
		if _, ok := x.extra[above]; ok {
			return true
		}
	}
	return false
}

// Ancestors calls fn with every node above n, each once, in no order.
func (n *Node) Ancestors(fn func(*Node)) {
	for x := n; x != nil; x = x.up {
		for a := range x.extra {
			fn(a)
		}
		if x.up != nil {
			fn(x.up)
		}
	}
}

// AncestorCount returns how many nodes are above n.
func (n *Node) AncestorCount() int {
	count := 0
	for x := n; x != nil; x = x.up {
		count += len(x.extra)
		if x.up != nil {
			count++
		}
	}
	return count
}

// ancestorList returns p and every node above it.
func ancestorList(p *Node) []*Node {
	out := []*Node{p}
	p.Ancestors(func(a *Node) { out = append(out, a) })
	return out
}

// addExtra adds a to n's extra.
func (n *Node) addExtra(a *Node) {
	if n.extra == nil {
		n.extra, n.extraPeak = map[*Node]struct{}{}, 0
	}
	n.extra[a] = struct{}{}
	n.extraPeak = max(n.extraPeak, int32(len(n.extra)))
}

// compactBelow is the size of an extra under which it is not made again
// smaller (deleteExtra).
const compactBelow = 8

// deleteExtra takes a out of n's extra. A map keeps the room of the most
// it held: an extra that held many and holds a quarter of them is made
// again, so that the memory of a group's ancestors follows what it holds
// (after a refused write rolled back, or ancestors lost). Making it again
// costs what it holds, less than what it lost since it was made.
func (n *Node) deleteExtra(a *Node) {
	delete(n.extra, a)
	switch {
	case len(n.extra) == 0:
		n.extra = nil
	case n.extraPeak >= compactBelow && int32(len(n.extra)) < n.extraPeak/4:
		n.extra, n.extraPeak = maps.Collect(maps.All(n.extra)), int32(len(n.extra))
	}
}

// marks returns k marks for a walk, none of which a node has yet.
func (g *Graph) marks(k uint64) uint64 {
	g.epoch += k
	return g.epoch - k + 1
}

// addAbove gives c, just nested in p, and every node below c, p and every
// node above p, and touches each node whose ancestors it changed. Only
// what c did not have yet (gain) is new to any node, and only to a node
// below one that gains: a walk from c down through the nodes that gain
// finds them, on the ancestors as they were, and stops where a node had
// all of gain. Then c takes gain; a node that gains takes it through its
// up when its up gains too, else in its extra; and a node whose up gains
// drops from its extra what it now has through up.
func (g *Graph) addAbove(p, c *Node) {
	g.most = mostAbove{}
	if c.IsAbove(p) {
		return // c had p, and all above p, and so had every node below c
	}
	if c.eagerBelow == 0 {
		// Every node below c takes its ancestors from c.
		g.takeAbove(p, c, nil)
		g.touch(c, changedAbove)
		g.most.belowAll(c, c.AncestorCount())
		return
	}
	above := ancestorList(p)
	var gain []*Node
	for _, a := range above {
		if !c.IsAbove(a) {
			gain = append(gain, a)
		}
	}
	g.steps += int64(len(above))
	inGain, kept, gains := g.marks(3), g.epoch-1, g.epoch
	for _, a := range gain {
		a.seen = inGain
	}
	gaining, others := g.gainers(c, gain, gains, kept)
	defer g.keepWalk(gaining, others)
	g.takeAbove(p, c, gain)
	g.touch(c, changedAbove)
	var ups []*Node
	for _, d := range gaining[1:] {
		if d.lazy {
			continue
		}
		switch {
		case d.up.seen == gains: // it gains through its up
		case len(d.extra)+len(gain) > 1+d.up.AncestorCount():
			// Its extra would hold more than its up brings: it takes a
			// parent that gains for its up.
			ups = append(ups, d)
		default:
			g.addExtras(d, gain) // its up has what it had
		}
		g.touch(d, changedAbove)
	}
	for _, d := range ups {
		g.upToGaining(d, gains)
	}
	for _, list := range [][]*Node{gaining[1:], others} {
		for _, d := range list {
			if d.up.seen == gains && len(d.extra) > 0 {
				d.dropExtras(inGain, gain)
				g.steps += int64(min(len(d.extra), len(gain)))
			}
		}
	}
	g.most.ofGaining(gaining)
	g.steps += int64(len(gaining))
}

// mostAbove is, of the nodes whose ancestors the latest addAbove changed,
// the most ancestors one has now (count): what a bound on ancestors is
// checked against. from is the first node found with as many, or a node
// whose deepest chain below ends at one (deep).
type mostAbove struct {
	count int
	from  *Node
	deep  bool
}

// ofGaining finds the most ancestors among gaining, the nodes a walk of
// addAbove found gaining, and the lazy ones below them, which gain what
// their one parent does.
func (m *mostAbove) ofGaining(gaining []*Node) {
	for _, x := range gaining {
		n := x.AncestorCount()
		if x.eagerBelow == 0 {
			m.belowAll(x, n)
			continue
		}
		m.offer(n, x, false)
		for _, e := range x.Children {
			if d := e.Node; d.lazy && d.eagerBelow == 0 {
				m.belowAll(d, n+1)
			}
		}
	}
}

// belowAll offers x, which has n ancestors, and every node below it,
// none of which has a parent but its own: the deepest of them has n and
// one more for each nesting between it and x.
func (m *mostAbove) belowAll(x *Node, n int) {
	m.offer(n+int(x.deepest), x, x.deepest > 0)
}

func (m *mostAbove) offer(n int, x *Node, deep bool) {
	if m.from == nil || n > m.count {
		*m = mostAbove{count: n, from: x, deep: deep}
	}
}

// node returns the node with the most ancestors: from, or the end of the
// deepest chain below it whose groups are first in byte order.
func (m *mostAbove) node() *Node {
	x := m.from
	for m.deep && x.deepest > 0 {
		for _, e := range x.Children {
			if e.Node.deepest == x.deepest-1 {
				x = e.Node
				break
			}
		}
	}
	return x
}

// takeAbove gives c, just nested in p, p and every node above p, gain
// those of them it lacked (nil: not known yet). c takes p for its up when
// it had no parent, or when p brings more ancestors than c had: they are
// shared, and what c had is its extra.
func (g *Graph) takeAbove(p, c *Node, gain []*Node) {
	switch had, brings := c.AncestorCount(), 1+p.AncestorCount(); {
	case c.up == nil:
		c.up = p // c had no parent: it gains all p brings
	case brings > had:
		g.moveUp(c, p)
	case gain != nil:
		for _, a := range gain {
			c.addExtra(a)
		}
	default:
		add := func(a *Node) {
			if !c.IsAbove(a) {
				c.addExtra(a)
			}
		}
		add(p)
		p.Ancestors(add)
		g.steps += int64(brings)
	}
}

// upToGaining makes a parent of d that gains (marked gains) d's up, and
// what d had that the parent does not hold its extra, as a nesting does
// for its child when its parent brings more than it had: a group below
// gains much at the cost of what it had, and holds it once, not a copy.
// Run when every node that gains holds what it gains but d, and those
// like it: what such a parent does not hold yet, of gain, is dropped from
// d's extra after (dropExtras).
func (g *Graph) upToGaining(d *Node, gains uint64) {
	var x *Node
	for _, e := range d.Parents {
		if e.Node.seen == gains {
			x = e.Node
			break
		}
	}
	g.moveUp(d, x)
}

// moveUp makes x, a parent of n, n's up: what n had that is neither x
// nor above x goes to its extra.
func (g *Graph) moveUp(n, x *Node) {
	var old []*Node
	n.Ancestors(func(a *Node) { old = append(old, a) })
	n.up, n.extra = x, nil
	for _, a := range old {
		if a != x && !x.IsAbove(a) {
			n.addExtra(a)
		}
	}
	g.steps += int64(len(old))
}

// gainers returns c and every node below it that lacks any of gain, each
// after a parent of it, marked gains; and the other nodes among their
// children, marked kept, which lack none.
func (g *Graph) gainers(c *Node, gain []*Node, gains, kept uint64) (gaining, others []*Node) {
	c.seen = gains
	gaining, others = append(g.walk[0][:0], c), g.walk[1][:0]
	for i := 0; i < len(gaining); i++ {
		if gaining[i].eagerBelow == 0 {
			continue // every group below it is lazy
		}
		for _, e := range gaining[i].Children {
			d := e.Node
			if d.seen == gains || d.seen == kept {
				continue
			}
			g.steps++
			if d.lazy {
				// It gains through its one parent what that gains,
				// untouched; what is below it is walked only when it
				// holds a node that is not lazy.
				if d.eagerBelow > 0 {
					d.seen = gains
					gaining = append(gaining, d)
				}
				continue
			}
			// A node whose ancestors are all through its up lacks what
			// its up lacks.
			if d.up.seen == gains && len(d.extra) == 0 || lacksAny(d, gain) {
				d.seen = gains
				gaining = append(gaining, d)
			} else {
				d.seen = kept
				others = append(others, d)
			}
		}
	}
	return gaining, others
}

// keepWalk keeps the lists of a walk, emptied, for the next one.
func (g *Graph) keepWalk(gaining, others []*Node) {
	clear(gaining)
	clear(others)
	g.walk = [2][]*Node{gaining[:0], others[:0]}
}

// lacksAny reports whether any of gain is not above d.
func lacksAny(d *Node, gain []*Node) bool {
	for _, a := range gain {
		if !d.IsAbove(a) {
			return true
		}
	}
	return false
}

// dropExtras takes out of d's extra each of gain, whose nodes are marked
// inGain.
func (d *Node) dropExtras(inGain uint64, gain []*Node) {
	if len(d.extra) <= len(gain) {
		for a := range d.extra {
			if a.seen == inGain {
				d.deleteExtra(a)
			}
		}
		return
	}
	for _, a := range gain {
		d.deleteExtra(a)
	}
}

// addExtras adds to d's extra each of above d does not have yet. d's up
// and the nodes it reaches up from it are none of those above changes.
func (g *Graph) addExtras(d *Node, above []*Node) {
	for _, a := range above {
		if !d.IsAbove(a) {
			d.addExtra(a)
		}
	}
	g.steps += int64(len(above))
}

// removeAbove puts right the ancestors of c, whose nesting in p has ended
// (p nil: all its nestings in its parents), and takes out of those of
// every node below it those c lost and they cannot reach otherwise, each
// after its parents, and touches each node whose ancestors changed. Only
// what c lost can leave a set below it, and only a set below a node that
// lost some: the walk goes down from c through the nodes that lose, in the
// order of their heights (a parent is higher than its child), so that a
// nesting's end costs the groups that lose ancestors times what c lost.
func (g *Graph) removeAbove(p, c *Node) {
	switch {
	case c.up == nil:
		return // it had no ancestors
	case len(c.Parents) == 0 && len(c.Children) == 0:
		c.up, c.extra = nil, nil // it lost them all, and has no one to tell
		g.touch(c, changedAbove)
		return
	}
	lost := g.loseParent(p, c)
	if len(lost) == 0 {
		return // nothing below c can have lost an ancestor either
	}
	g.touch(c, changedAbove)
	if len(c.Children) == 0 {
		return
	}
	inLost, queued, losing := g.marks(3), g.epoch-1, g.epoch
	for _, a := range lost {
		a.seen = inLost
	}
	c.seen = losing
	// levels[h] are the nodes to look at whose highest is c's + h.
	var levels [][]*Node
	queue := func(n *Node) {
		if n.eagerBelow == 0 {
			return // every group below it is lazy
		}
		for _, e := range n.Children {
			if d := e.Node; d.seen != queued && (!d.lazy || d.eagerBelow > 0) {
				d.seen = queued
				h := int(d.highest - c.highest)
				for len(levels) <= h {
					levels = append(levels, nil)
				}
				levels[h] = append(levels[h], d)
			}
		}
	}
	queue(c)
	for h := 1; h < len(levels); h++ {
		for _, d := range levels[h] {
			if g.forget(d, lost, inLost, losing) {
				d.seen = losing
				if !d.lazy {
					g.touch(d, changedAbove)
				}
				queue(d)
			}
		}
	}
}

// forget takes lost, which d had above it, out of d's ancestors but those
// it still reaches through a parent, and reports whether it lost any. Its
// parents' ancestors are as they are now; those that lost some are marked
// losing, and the nodes of lost inLost. A node with one parent, its up,
// loses what that parent lost, and holds nothing of its own. One it still
// reaches, which its up no longer has, goes to its extra.
func (g *Graph) forget(d *Node, lost []*Node, inLost, losing uint64) bool {
	if d.lazy {
		return true // its one parent lost some; it is not touched
	}
	if len(d.Parents) == 1 && len(d.extra) == 0 {
		g.steps++
		return d.up.seen == losing
	}
	// Made again from its parents, d costs the ancestors of all of them
	// at most, and as much to count those of lost it keeps; taking lost
	// out one by one costs lost times its parents. It takes the cheaper.
	all := 0
	for _, e := range d.Parents {
		all += 1 + e.Node.AncestorCount()
	}
	g.steps += int64(len(d.Parents))
	if 2*all < len(lost)*len(d.Parents) {
		g.rebuild(d)
		kept := 0
		d.Ancestors(func(a *Node) {
			if a.seen == inLost {
				kept++
			}
		})
		g.steps += int64(all)
		return kept < len(lost)
	}
	g.steps += int64(len(lost) * (1 + len(d.Parents)))
	changed := false
	for _, x := range lost {
		reaches := false
		for _, e := range d.Parents {
			if e.Node == x || e.Node.IsAbove(x) {
				reaches = true
				break
			}
		}
		viaUp := d.up == x || d.up.IsAbove(x)
		_, inExtra := d.extra[x]
		switch {
		case reaches && !viaUp && !inExtra:
			d.addExtra(x)
		case (!reaches || viaUp) && inExtra:
			d.deleteExtra(x)
		}
		changed = changed || !reaches
	}
	g.upToMost(d)
	return changed
}

// upToMost makes the parent of d that brings the most ancestors its up
// when its extra holds more than its up brings, as a nesting leaves it
// (takeAbove): a group whose up lost ancestors would otherwise hold a copy
// of those of its other parents, though one of them could share them.
func (g *Graph) upToMost(d *Node) {
	has := d.up.AncestorCount()
	if len(d.extra) <= 1+has {
		return
	}
	up, most := d.parentWithMost()
	g.steps += int64(len(d.Parents))
	if most > has {
		g.moveUp(d, up)
	}
}

// parentWithMost returns the first of n's parents with the most ancestors,
// and how many it has.
func (n *Node) parentWithMost() (*Node, int) {
	var up *Node
	most := -1
	for _, e := range n.Parents {
		if k := e.Node.AncestorCount(); k > most {
			up, most = e.Node, k
		}
	}
	return up, most
}

// loseParent puts right c's ancestors after its nesting in p ended (p
// nil: all its nestings in its parents), and returns those it lost: p or
// above p, none of which it reaches through its other parents. The work
// grows with p's ancestors and what of them c held through p alone, not
// with c's other parents' ancestors.
func (g *Graph) loseParent(p, c *Node) []*Node {
	var lost []*Node
	if len(c.Parents) == 0 {
		c.Ancestors(func(a *Node) { lost = append(lost, a) })
		c.up, c.extra = nil, nil
		g.steps += int64(len(lost))
		return lost
	}
	reached := func(x *Node) bool {
		for _, e := range c.Parents {
			if e.Node == x || e.Node.IsAbove(x) {
				return true
			}
		}
		return false
	}
	if c.up != p {
		if c.up.IsAbove(p) {
			return nil // its up has p, and all above p
		}
		// What it had of p's and its up has not is in its extra.
		drop := func(x *Node) {
			g.steps++
			if _, held := c.extra[x]; held && !reached(x) {
				c.deleteExtra(x)
				lost = append(lost, x)
			}
		}
		drop(p)
		p.Ancestors(drop)
		return lost
	}
	// p was its up: the parent with the most ancestors is now, and what it
	// had through p the new up has not goes to its extra when another
	// parent reaches it; the rest is lost. What its extra held, another
	// parent brought.
	up, _ := c.parentWithMost()
	extra := c.extra
	c.up, c.extra = up, nil
	for x := range extra {
		if x != up && !up.IsAbove(x) {
			c.addExtra(x)
		}
	}
	keep := func(x *Node) {
		g.steps++
		switch {
		case x == up || up.IsAbove(x):
		case reached(x):
			c.addExtra(x)
		default:
			lost = append(lost, x)
		}
	}
	keep(p)
	p.Ancestors(keep)
	g.steps += int64(len(c.Parents) + len(extra))
	return lost
}

// rebuild makes c's ancestors again from its parents: its up is the
// parent with the most, the others' go to its extra.
func (g *Graph) rebuild(c *Node) {
	c.up, _ = c.parentWithMost()
	c.extra = nil
	for _, e := range c.Parents {
		if e.Node == c.up {
			continue
		}
		g.addExtras(c, ancestorList(e.Node))
	}
}
