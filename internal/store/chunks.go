package store

import "slices"

// Both sorted sets of this package, a group's members and the reverse
// index's pairs, keep their elements in ordered chunks. Each finds positions
// its own way; these keep the chunks in shape once a position is found.

// insertAt inserts v at chunks[i][j] (chunks must not be empty). A full chunk
// grows by an eighth, not by append's doubling, so a chunk wastes at most an
// eighth of its size; a chunk over limit splits in two.
func insertAt[T any](chunks [][]T, i, j int, v T, limit int) [][]T {
	c := chunks[i]
	if len(c) == cap(c) {
		c = cloneChunk(c)
	}
	c = slices.Insert(c, j, v)
	if len(c) <= limit {
		chunks[i] = c
		return chunks
	}
	half := len(c) / 2
	chunks[i] = cloneChunk(c[:half])
	return slices.Insert(chunks, i+1, cloneChunk(c[half:]))
}

// deleteAt deletes chunks[i][j]. An emptied chunk is dropped; a thin one is
// merged into its neighbour, so that removals cannot leave many tiny chunks;
// one that removals left mostly empty gives back its room.
func deleteAt[T any](chunks [][]T, i, j int, limit int) [][]T {
	c := slices.Delete(chunks[i], j, j+1)
	switch {
	case len(c) == 0:
		return slices.Delete(chunks, i, i+1)
	case len(c) < limit/4 && i+1 < len(chunks) && len(c)+len(chunks[i+1]) <= limit/2:
		chunks[i] = cloneChunk(append(slices.Clip(c), chunks[i+1]...))
		return slices.Delete(chunks, i+1, i+2)
	case cap(c) > 2*len(c)+8:
		chunks[i] = cloneChunk(c)
	default:
		chunks[i] = c
	}
	return chunks
}

// cloneChunk copies c with room for an eighth more.
func cloneChunk[T any](c []T) []T {
	clone := make([]T, len(c), len(c)+len(c)/8+4)
	copy(clone, c)
	return clone
}
