package snap

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// ReadFile with each (decode with each) and without (decode without) agree on
// every input: the same error, or the same groups and rest.
func FuzzEachAgreesWithDecode(f *testing.F) {
	var buf bytes.Buffer
	if err := Encode(&buf, eachState()); err != nil {
		f.Fatal(err)
	}
	data := buf.Bytes()
	f.Add(data[8 : len(data)-4])
	f.Add([]byte{0, 0, 0, 0, 2, 1, 'a', 0, 2, 5, 1, 1, 'b', 0, 1, 3, 0, 0})
	var nested bytes.Buffer
	if err := Encode(&nested, nestingState()); err != nil {
		f.Fatal(err)
	}
	f.Add(nested.Bytes()[8 : nested.Len()-4])
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []byte{1, 6, 7, byte(data[4])} {
			file := snapshotFile(v, body)
			want, werr := Decode(file, "p")
			var got []Group
			rest, gerr := decode(file, "p", func(g Group) error {
				g.UIDs = slices.Clone(g.UIDs)
				got = append(got, g)
				return nil
			})
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("v%d: Decode %v, each %v", v, werr, gerr)
			}
			if werr != nil {
				if werr.Error() != gerr.Error() {
					t.Fatalf("v%d: Decode %v, each %v", v, werr, gerr)
				}
				continue
			}
			if len(got) != len(want.Groups) {
				t.Fatalf("v%d: %d groups vs %d", v, len(got), len(want.Groups))
			}
			for i := range got {
				if fmt.Sprint(got[i]) != fmt.Sprint(want.Groups[i]) {
					t.Fatalf("v%d: group %d: %v vs %v", v, i, got[i], want.Groups[i])
				}
			}
			rest.Groups = want.Groups
			if fmt.Sprint(rest) != fmt.Sprint(want) {
				t.Fatalf("v%d: rest differs", v)
			}
		}
	})
}
