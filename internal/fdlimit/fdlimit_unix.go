//go:build unix

package fdlimit

import "syscall"

// Raise raises the soft limit of open descriptors to the hard limit, as a
// server that holds a descriptor per client should (Go does so itself at
// start since 1.19, so the limit found is usually raised already; Raise
// makes sure), and returns the limit now in force.
func Raise() (Limit, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return Limit{}, err
	}
	lim := Limit{Soft: uint64(rl.Cur), Hard: uint64(rl.Max), Known: true}
	if rl.Cur < rl.Max {
		raised := syscall.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim.Soft = uint64(rl.Max)
		}
	}
	return lim, nil
}
