package group

import "slices"

// IDPage is a page of group ids: the limit smallest added (0: all). With a
// limit, it keeps them in a max-heap, so that a page of a user's groups
// costs memory for the page only: a page of l groups of a user in k costs
// O(k log l) time and O(l) memory, however deep the page.
type IDPage struct {
	limit int
	h     []string // a max-heap, with a limit
}

// NewIDPage returns an empty page of at most limit ids (0: all).
func NewIDPage(limit int) IDPage { return IDPage{limit: limit} }

// Add adds id to the page, if it is among the limit smallest.
func (p *IDPage) Add(id string) {
	switch {
	case p.limit == 0:
		p.h = append(p.h, id)
	case len(p.h) < p.limit:
		p.h = append(p.h, id)
		for i := len(p.h) - 1; i > 0; { // sift up
			parent := (i - 1) / 2
			if p.h[parent] >= p.h[i] {
				break
			}
			p.h[parent], p.h[i] = p.h[i], p.h[parent]
			i = parent
		}
	case id < p.h[0]:
		p.h[0] = id
		for i := 0; ; { // sift down
			largest, l, r := i, 2*i+1, 2*i+2
			if l < len(p.h) && p.h[l] > p.h[largest] {
				largest = l
			}
			if r < len(p.h) && p.h[r] > p.h[largest] {
				largest = r
			}
			if largest == i {
				break
			}
			p.h[i], p.h[largest] = p.h[largest], p.h[i]
			i = largest
		}
	}
}

// Sorted returns the ids of the page, in ascending order.
func (p *IDPage) Sorted() []string {
	slices.Sort(p.h)
	return p.h
}
