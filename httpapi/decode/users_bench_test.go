package decode

import (
	"strconv"
	"strings"
	"testing"
)

func BenchmarkParseUsers(b *testing.B) {
	for _, n := range []int{3, 1000} {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = strconv.Itoa(100000000 + i*7919)
		}
		input := "[" + strings.Join(parts, ",") + "]"
		b.Run("bare/n="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			for b.Loop() {
				if _, err := ParseUsers(input, 10000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	mixed := `[1,"2",[3],[4,"Dee"],{"uid":5,"nickname":"Zoë \"Z\""}]`
	b.Run("mixed/n=5", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseUsers(mixed, 10000); err != nil {
				b.Fatal(err)
			}
		}
	})
}
