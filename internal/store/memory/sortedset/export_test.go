package sortedset

// ChunkBytes returns the bytes of encodings each chunk of s holds, in
// order: for the tests of the chunks' shape.
func ChunkBytes[T any, C Codec[T]](s *Set[T, C]) []int {
	n := make([]int, len(s.chunks))
	for i, ch := range s.chunks {
		n[i] = len(ch.rest)
	}
	return n
}
