package nesting

// The heights of a node: the longest chain of nestings below it (deepest)
// and above it (highest), kept as nestings change, so that the depth a new
// nesting would make costs two lookups (Check). Each node counts the
// neighbours its height comes through (a child whose deepest is one less
// than its own, a parent whose highest is): a new nesting raises heights
// on each side of it as far as they grow, and an ended one takes a node's
// height again from its neighbours only when the last of those is gone,
// so that ending many nestings of one group costs each a step.

// Deepest returns the longest chain of nestings below n (nil: none).
func (n *Node) Deepest() int {
	if n == nil {
		return 0
	}
	return int(n.deepest)
}

// Highest returns the longest chain of nestings above n (nil: none).
func (n *Node) Highest() int {
	if n == nil {
		return 0
	}
	return int(n.highest)
}

// heights tells the nodes at both ends of the nesting of c in p that it
// was made (made) or ended.
func (g *Graph) heights(p, c *Node, made bool) {
	if made {
		g.offer(p, c.deepest+1, down)
		g.offer(c, p.highest+1, up)
		return
	}
	g.withdraw(p, c.deepest+1, down)
	g.withdraw(c, p.highest+1, up)
}

// side is which of a node's heights: down, its deepest, through its
// children; up, its highest, through its parents.
type side bool

const (
	down side = false
	up   side = true
)

// of returns n's height on side s, the count of the neighbours it comes
// through, and the neighbours on that side and on the other.
func (n *Node) of(s side) (h, by *int32, through, others []Edge) {
	if s == up {
		return &n.highest, &n.highBy, n.Parents, n.Children
	}
	return &n.deepest, &n.deepBy, n.Children, n.Parents
}

// height returns n's height on side s.
func (n *Node) height(s side) int32 {
	if s == up {
		return n.highest
	}
	return n.deepest
}

// offer tells n that a neighbour on side s now gives it a chain of h.
func (g *Graph) offer(n *Node, h int32, s side) {
	height, by, _, others := n.of(s)
	g.steps++
	switch {
	case h == *height:
		*by++
	case h > *height:
		// What n gave its neighbours on the other side grows: an offer
		// of the more is all they need.
		*height, *by = h, 1
		for _, e := range others {
			g.offer(e.Node, h+1, s)
		}
	}
}

// withdraw tells n that a neighbour on side s no longer gives it a chain
// of h (it is gone, or gives less now).
func (g *Graph) withdraw(n *Node, h int32, s side) {
	height, by, through, others := n.of(s)
	g.steps++
	if h != *height {
		return
	}
	if *by--; *by > 0 {
		return
	}
	old := *height
	*height = 0
	for _, e := range through {
		switch nh := e.Node.height(s) + 1; {
		case nh > *height:
			*height, *by = nh, 1
		case nh == *height:
			*by++
		}
	}
	g.steps += int64(len(through))
	if *height < old {
		for _, e := range others {
			g.withdraw(e.Node, old+1, s)
		}
	}
}
