package decode

import (
	"math"

	"example.com/groupmembership/membership"
)

// maxUIDDigits is the length of math.MaxInt64, the largest uid, in decimal.
const maxUIDDigits = len("9223372036854775807")

// ParseUID parses s as a uid: a decimal integer from 1 to math.MaxInt64 with no
// sign, no leading zeros and nothing around it. ok is false for anything else.
func ParseUID(s string) (uid membership.UID, ok bool) {
	if s == "" || s[0] == '0' || len(s) > maxUIDDigits {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0') // at most 19 digits: cannot overflow uint64
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return membership.UID(n), true
}
