package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// loopFS is an ext4 filesystem in a file, mounted on a loop device, that the
// harness made itself: the only kind it will ever freeze or fill.
type loopFS struct {
	img string // the backing file
	mnt string // the mount point
	dev string // /dev/loopN, once verified

	mu       sync.Mutex
	frozen   bool
	watchdog *exec.Cmd
	thawNow  func()

	release func() // unmounts and removes everything; registered with atExit
}

// loopTools are what a loop filesystem needs; freezing needs fsfreeze too.
var loopTools = []string{"mkfs.ext4", "mount", "umount", "losetup", "fsfreeze"}

// canLoop says why the harness cannot make loop filesystems here, or "".
func canLoop() string {
	if os.Geteuid() != 0 {
		return "not root: mount and fsfreeze need root"
	}
	for _, t := range loopTools {
		if _, err := exec.LookPath(t); err != nil {
			return t + " is not installed"
		}
	}
	return ""
}

// mountLoopFS makes a sizeMiB ext4 image in os.TempDir, mounts it on a new
// directory and checks in /proc/self/mountinfo that what is mounted there is
// a loop device backed by that image.
func mountLoopFS(ctx context.Context, sizeMiB int64) (*loopFS, error) {
	if why := canLoop(); why != "" {
		return nil, errSkip(why)
	}
	f, err := os.CreateTemp("", "membership-attack-*.img")
	if err != nil {
		return nil, err
	}
	l := &loopFS{img: f.Name()}
	err = f.Truncate(sizeMiB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	mounted := false
	l.release = atExit("unmount "+l.img, func() { l.unmount(mounted) })
	fail := func(err error) (*loopFS, error) {
		l.release()
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	if err := command(ctx, 30*time.Second, "mkfs.ext4", "-q", "-F", l.img); err != nil {
		return fail(err)
	}
	if l.mnt, err = os.MkdirTemp("", "membership-attack-mnt-"); err != nil {
		return fail(err)
	}
	if err := command(ctx, 30*time.Second, "mount", "-o", "loop", l.img, l.mnt); err != nil {
		return fail(err)
	}
	mounted = true
	if err := l.verify(); err != nil {
		return fail(fmt.Errorf("refusing to use %s: %w", l.mnt, err))
	}
	return l, nil
}

// verify checks that l.mnt is an ext4 mount of a loop device whose backing
// file is l.img, and sets l.dev. Nothing is frozen or filled before it has
// passed.
func (l *loopFS) verify() error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		// id parent major:minor root mountpoint options... - fstype source superopts
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 2 || f[4] != l.mnt {
			continue
		}
		if g[0] != "ext4" || !strings.HasPrefix(g[1], "/dev/loop") {
			return fmt.Errorf("mounted there is %s %s, not an ext4 loop device", g[0], g[1])
		}
		backing, err := os.ReadFile(filepath.Join("/sys/block", strings.TrimPrefix(g[1], "/dev/"), "loop/backing_file"))
		if err != nil {
			return fmt.Errorf("reading the backing file of %s: %w", g[1], err)
		}
		if got := strings.TrimSpace(string(backing)); got != l.img {
			return fmt.Errorf("%s is backed by %s, not by %s", g[1], got, l.img)
		}
		l.dev = g[1]
		return nil
	}
	return errors.New("not found in /proc/self/mountinfo")
}

// freeze freezes the filesystem. A detached watchdog process thaws it after
// watchdogAfter even if the harness is killed outright (SIGKILL runs no
// cleanups); thaw is also registered to run on every way out.
func (l *loopFS) freeze(ctx context.Context, watchdogAfter time.Duration) error {
	if l.dev == "" {
		return errors.New("not verified as our own loop filesystem: not freezing it")
	}
	// On SIGTERM the shell stops its sleep and reaps it, so that stopping
	// the watchdog leaves no orphan behind.
	script := fmt.Sprintf(`trap 'kill $p; wait $p; exit 0' TERM; sleep %d & p=$!; wait $p; exec fsfreeze -u '%s' 2>/dev/null`,
		int(watchdogAfter.Seconds()), l.mnt)
	wd := exec.Command("sh", "-c", script)
	wd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives the harness
	if err := wd.Start(); err != nil {
		return fmt.Errorf("starting the thaw watchdog: %w", err)
	}
	l.mu.Lock()
	l.watchdog = wd
	l.frozen = true // before the call: a freeze cut short may still have taken
	l.mu.Unlock()
	l.thawNow = atExit("thaw "+l.mnt, l.thaw)
	if err := command(ctx, 15*time.Second, "fsfreeze", "-f", l.mnt); err != nil {
		l.thawNow()
		return err
	}
	return nil
}

// thaw unfreezes the filesystem if the harness froze it, and stops the
// watchdog. It uses its own context: it must run even when the attack's has
// ended.
func (l *loopFS) thaw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		if err := command(context.Background(), 15*time.Second, "fsfreeze", "-u", l.mnt); err != nil && !strings.Contains(err.Error(), "Invalid argument") {
			fmt.Fprintf(os.Stderr, "attack: THAWING %s FAILED: %v; run: fsfreeze -u %s\n", l.mnt, err, l.mnt)
		}
		l.frozen = false
	}
	if wd := l.watchdog; wd != nil {
		exited := make(chan struct{})
		go func() {
			_ = wd.Wait()
			close(exited)
		}()
		_ = wd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-wd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		l.watchdog = nil
	}
}

// unmount thaws, unmounts, detaches the loop device if the unmount left it,
// and removes the image and the mount point. The service on it must have
// stopped.
func (l *loopFS) unmount(mounted bool) {
	if l.thawNow != nil {
		l.thawNow()
	}
	if mounted {
		if err := command(context.Background(), 30*time.Second, "umount", l.mnt); err != nil {
			fmt.Fprintf(os.Stderr, "attack: umount %s: %v; trying a lazy unmount\n", l.mnt, err)
			_ = command(context.Background(), 30*time.Second, "umount", "-l", l.mnt)
		}
	}
	// mount -o loop sets autoclear, so the device normally goes with the
	// unmount; detach it only if it is still bound to our image.
	if l.dev != "" {
		backing, err := os.ReadFile(filepath.Join("/sys/block", strings.TrimPrefix(l.dev, "/dev/"), "loop/backing_file"))
		if err == nil && strings.TrimSpace(string(backing)) == l.img {
			_ = command(context.Background(), 30*time.Second, "losetup", "-d", l.dev)
		}
	}
	if l.mnt != "" {
		_ = os.Remove(l.mnt) // Remove, not RemoveAll: never recurse into a mount still there
	}
	_ = os.Remove(l.img)
}

// command runs a tool with a deadline and folds its output into the error.
func command(ctx context.Context, limit time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// errSkip marks an attack the machine cannot run.
type errSkip string

func (e errSkip) Error() string { return string(e) }
