package nesting

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
		n.extra = map[*Node]struct{}{}
	}
	n.extra[a] = struct{}{}
}

// deleteExtra takes a out of n's extra.
func (n *Node) deleteExtra(a *Node) {
	delete(n.extra, a)
	if len(n.extra) == 0 {
		n.extra = nil
	}
}

// addAbove gives c, just nested in p, and below, every node below c, p
// and every node above p. A node whose up is c or below it has them
// through up: it only gives up those it held itself. Any other has them
// added to its extra, but those it had. c takes p for its up when it had
// no parent, or when p brings more ancestors than c had (they are then
// shared, and what c had is its extra).
func (g *Graph) addAbove(p, c *Node, below []*Node) {
	if c.up == nil && len(below) == 0 {
		c.up = p // a group nested for the first time, with no subgroups
		return
	}
	above := ancestorList(p)
	region := make(map[*Node]bool, len(below)+1)
	region[c] = true
	for _, d := range below {
		region[d] = true
	}
	switch had := c.AncestorCount(); {
	case c.up == nil:
		c.up = p
	case len(above) > had:
		var old []*Node
		c.Ancestors(func(a *Node) { old = append(old, a) })
		c.up, c.extra = p, nil
		for _, a := range old {
			if a != p && !p.IsAbove(a) {
				c.addExtra(a)
			}
		}
		g.steps += int64(len(above) + had)
	default:
		g.addExtras(c, above)
	}
	for _, d := range below {
		g.steps++
		if !region[d.up] {
			g.addExtras(d, above)
			continue
		}
		// d has above through its up now: none in its extra.
		if len(d.extra) <= len(above) {
			for a := range d.extra {
				if a == p || p.IsAbove(a) {
					d.deleteExtra(a)
				}
			}
		} else {
			for _, a := range above {
				d.deleteExtra(a)
			}
		}
		g.steps += int64(min(len(d.extra), len(above)))
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

// removeAbove rebuilds the ancestors of c, one of whose nestings has
// ended, and takes out of those of every node below it those c lost and
// they cannot reach otherwise, each after its parents. Only what c lost
// can leave a set below it, so that a nesting's end costs the groups below
// it times what c lost, not times all their ancestors: a group in many
// groups loses one parent at the cost of its subgroups alone.
func (g *Graph) removeAbove(c *Node) {
	var old []*Node
	c.Ancestors(func(a *Node) { old = append(old, a) })
	g.rebuild(c)
	var lost []*Node
	for _, a := range old {
		if !c.IsAbove(a) {
			lost = append(lost, a)
		}
	}
	g.steps += int64(len(old))
	if len(lost) == 0 {
		return // nothing below c can have lost an ancestor either
	}
	g.touch(c, changedAbove)
	affected := g.Below(c.ID)
	in := make(map[*Node]int, len(affected)+1) // parents among the affected not yet done
	for _, d := range affected {
		in[d] = 0
	}
	for _, d := range append(affected, c) {
		for _, e := range d.Children {
			in[e.Node]++
		}
	}
	var ready []*Node
	for _, e := range c.Children {
		if in[e.Node]--; in[e.Node] == 0 {
			ready = append(ready, e.Node)
		}
	}
	for len(ready) > 0 {
		d := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		if g.forget(d, lost) {
			g.touch(d, changedAbove)
		}
		g.steps += int64(len(lost) * (1 + len(d.Parents)))
		for _, e := range d.Children {
			if in[e.Node]--; in[e.Node] == 0 {
				ready = append(ready, e.Node)
			}
		}
	}
}

// forget takes lost, which d had above it, out of d's ancestors but those
// it still reaches through a parent, and reports whether it lost any. Its
// parents' ancestors are as they are now. One it still reaches, which its
// up no longer has, goes to its extra.
func (g *Graph) forget(d *Node, lost []*Node) bool {
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
	return changed
}

// rebuild makes c's ancestors again from its parents: its up is the
// parent with the most, the others' go to its extra.
func (g *Graph) rebuild(c *Node) {
	c.up, c.extra = nil, nil
	most := -1
	for _, e := range c.Parents {
		if n := e.Node.AncestorCount(); n > most {
			c.up, most = e.Node, n
		}
	}
	for _, e := range c.Parents {
		if e.Node == c.up {
			continue
		}
		for _, a := range ancestorList(e.Node) {
			if !c.IsAbove(a) {
				c.addExtra(a)
			}
		}
		g.steps += int64(1 + e.Node.AncestorCount())
	}
}
