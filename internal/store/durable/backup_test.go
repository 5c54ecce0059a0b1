package durable

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// A backup taken while writers change the store holds the state at its
// revision exactly: restored into a data directory, every list equals the
// one the feed's changes up to that revision give.
func TestBackupUnderConcurrentWritesRestoresItsRevision(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) interface {
		membership.Store
		Backup() *snap.Backup
	}{
		"memory": func(t *testing.T) interface {
			membership.Store
			Backup() *snap.Backup
		} {
			return memory.New()
		},
		"durable": func(t *testing.T) interface {
			membership.Store
			Backup() *snap.Backup
		} {
			d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll, SnapshotBytes: 4096})
			t.Cleanup(func() { d.Close() })
			return d
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			groups := []string{"a", "b", "c", "d", "e"}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					for {
						select {
						case <-stop:
							return
						default:
						}
						group := groups[rng.IntN(len(groups))]
						uid := membership.UID(1 + rng.IntN(50))
						var err error
						if rng.IntN(3) == 0 {
							_, err = storetest.Remove(ctx, s, group, []membership.UID{uid})
						} else {
							u := membership.User{UID: uid}
							if rng.IntN(4) == 0 {
								u.Nickname, u.HasNickname = fmt.Sprint("n", rng.IntN(5)), true
							}
							_, err = storetest.Add(ctx, s, group, []membership.User{u, {UID: uid + 100}})
						}
						if !assert.NoError(t, err) {
							return
						}
					}
				}()
			}
			// Take the backup once the writers have made some changes.
			for {
				_, latest, err := s.Changes(ctx, membership.ChangeOptions{Limit: 1})
				require.NoError(t, err)
				if latest >= 200 {
					break
				}
				wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, _, _ = s.Changes(wctx, membership.ChangeOptions{After: latest, Wait: true})
				cancel()
			}
			backup := s.Backup()
			_, err := storetest.Add(ctx, s, "after", []membership.User{{UID: 7}})
			require.NoError(t, err)
			close(stop)
			wg.Wait()
			var file bytes.Buffer
			var n int64
			n, err = backup.WriteTo(&file)
			require.NoError(t, err)
			assert.Equal(t, int64(file.Len()), n)

			// The state at the backup's revision, from the feed.
			f := storetest.NewFollower()
			for _, c := range storetest.AllChanges(t, s, 0) {
				if c.Revision > backup.Revision() {
					break
				}
				f.Apply(c)
			}

			path := filepath.Join(t.TempDir(), "backup")
			require.NoError(t, os.WriteFile(path, file.Bytes(), 0o600))
			dir := filepath.Join(t.TempDir(), "restored")
			rev, err := Restore(path, dir)
			require.NoError(t, err)
			assert.Equal(t, backup.Revision(), rev)
			d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer d.Close()
			for _, group := range append(groups, "after") {
				got, _ := storetest.ListAll(t, d, group)
				assert.Equal(t, f.ListOf(group), got, "group %s", group)
			}
			res, err := storetest.Add(ctx, d, "z", []membership.User{{UID: 1}})
			require.NoError(t, err)
			assert.Equal(t, rev+1, res.Revision, "revisions go on from the backup's")
			_, _, err = d.Changes(ctx, membership.ChangeOptions{After: rev - 1})
			assert.Equal(t, membership.CodeChangesGone, membership.ErrorCode(err), "the feed starts at the backup's revision")
		})
	}
}

// Restore refuses a damaged or foreign file, and a directory with data in
// it, with a message that says what to do, and writes nothing.
func TestRestoreRefuses(t *testing.T) {
	_, good, _ := backupOf(t, 1, 2)
	write := func(b []byte) string {
		path := filepath.Join(t.TempDir(), "backup")
		require.NoError(t, os.WriteFile(path, b, 0o600))
		return path
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x01
	tests := []struct {
		name, file, dir, want string
	}{
		{"a flipped bit", write(flipped), "", "checksum does not match: the file is damaged: it is not a whole backup; take another"},
		{"cut short", write(good[:len(good)-7]), "", "it is not a whole backup"},
		{"not a backup", write([]byte("hello, world")), "", "not a membership snapshot"},
		{"empty", write(nil), "", "not a membership snapshot"},
		{"no such file", filepath.Join(t.TempDir(), "missing"), "", "no such file"},
		{"a directory with data", write(good), "full", "is not empty (it has DATA): restore into an empty or new directory, never over data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restored")
			if tt.dir == "full" {
				require.NoError(t, os.MkdirAll(dir, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "DATA"), []byte("x"), 0o600))
			}
			_, err := Restore(tt.file, dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			if tt.dir == "" {
				_, statErr := os.Stat(dir)
				assert.True(t, os.IsNotExist(statErr), "nothing written")
			}
		})
	}
}

// Restore refuses a whole file whose contents break the service's rules: a
// checksum says only that the file is whole, and a file with a group listed
// twice, an empty group id or a nickname not in UTF-8 can have a valid one.
func TestRestoreRefusesContentsThatBreakTheRules(t *testing.T) {
	base := func() *snap.State {
		return &snap.State{
			LastRevision: 5,
			Nicknames:    map[membership.UID]string{1: "Eve"},
			Groups:       []snap.Group{{ID: "a", Revision: 3, UIDs: []membership.UID{1, 2}}},
		}
	}
	tests := []struct {
		name   string
		change func(*snap.State)
		want   string
	}{
		{"a group twice", func(st *snap.State) {
			st.Groups = append(st.Groups, snap.Group{ID: "a", Revision: 4, UIDs: []membership.UID{3}})
		}, `group "a" is there twice`},
		{"an empty group id", func(st *snap.State) { st.Groups[0].ID = "" }, "group id is empty"},
		{"a control character", func(st *snap.State) { st.Groups[0].ID = "a\x00b" }, "control character"},
		{"a group with no members", func(st *snap.State) { st.Groups = append(st.Groups, snap.Group{ID: "b", Revision: 4}) }, `group "b" has no members`},
		{"a revision past the latest", func(st *snap.State) { st.Groups[0].Revision = 9 }, "past the latest"},
		{"a nickname not in UTF-8", func(st *snap.State) { st.Nicknames[1] = "\xff" }, "the nickname of user 1 is not valid"},
		{"an empty nickname", func(st *snap.State) { st.Nicknames[1] = "" }, "the nickname of user 1 is not valid"},
		{"a nickname of a user in no group", func(st *snap.State) { st.Nicknames[7] = "Bo" }, "user 7 has a nickname but is in no group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := base()
			require.NoError(t, st.Check(), "the base is valid")
			tt.change(st)
			var file bytes.Buffer
			require.NoError(t, snap.Encode(&file, st))
			path := filepath.Join(t.TempDir(), "crafted")
			require.NoError(t, os.WriteFile(path, file.Bytes(), 0o600))
			dir := filepath.Join(t.TempDir(), "restored")
			_, err := Restore(path, dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "it is not a backup this service wrote")
			_, statErr := os.Stat(dir)
			assert.True(t, os.IsNotExist(statErr), "nothing written")
		})
	}
}

// A restore stopped part-way leaves a directory the service refuses to
// start on, naming -restore, whatever point it was stopped at and without
// removing anything; Restore then starts it over and the service starts
// with the backup's state. A directory a restore of a version before the
// marker left (a snapshot's temporary file and nothing else) is treated
// alike.
func TestUnfinishedRestoreIsRefusedThenRedone(t *testing.T) {
	file, backup, backupRev := backupOf(t, 1, 2)

	// The shapes a restore leaves at each point it can be stopped.
	half := backup[:len(backup)/2]
	snapshotTemp := "snapshot-0000000000000001.snap-123.tmp"
	tests := []struct {
		name  string
		files map[string][]byte
	}{
		{"the marker only", map[string][]byte{restoringFileName: nil}},
		{"half a snapshot", map[string][]byte{restoringFileName: nil, lockFileName: nil, snapshotTemp: half}},
		{"the snapshot", map[string][]byte{restoringFileName: nil, lockFileName: nil, "snapshot-0000000000000001.snap": backup}},
		{"all but the marker's removal", map[string][]byte{restoringFileName: nil, lockFileName: nil,
			"snapshot-0000000000000001.snap": backup, "log-0000000000000001.wal": []byte("x"), dataFileName: []byte("x")}},
		{"half a snapshot, from a version before the marker", map[string][]byte{snapshotTemp: half}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restored")
			require.NoError(t, os.Mkdir(dir, 0o700))
			for name, data := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
			}

			_, err := Open(dir, Options{CommitTimeout: testCommitTimeout})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "holds a restore that did not finish")
			assert.Contains(t, err.Error(), "Run -restore again with the backup and -data-dir "+dir)
			for name := range tt.files {
				assert.FileExists(t, filepath.Join(dir, name), "the refusal removes nothing")
			}
			_, err = os.Stat(filepath.Join(dir, dataFileName))
			assert.Equal(t, tt.files[dataFileName] != nil, err == nil, "the refusal writes no DATA")

			rev, err := Restore(file, dir)
			require.NoError(t, err)
			assert.Equal(t, backupRev, rev)
			assert.NoFileExists(t, filepath.Join(dir, restoringFileName))
			assert.NoFileExists(t, filepath.Join(dir, snapshotTemp))
			d := openTestDurable(t, dir, Options{})
			defer d.Close()
			got, _ := storetest.ListAll(t, d, "g")
			assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, got)
			_, _, err = d.Changes(context.Background(), membership.ChangeOptions{After: 0})
			require.Error(t, err)
			assert.Equal(t, fmt.Sprintf("the changes after revision 0 are not kept: the feed starts after revision %d, the latest: "+
				"list the groups again, then follow the feed from revision %d", rev, rev), err.Error(), "no revision past the latest named")
		})
	}
}

// Restore starts over only a directory that holds nothing but what a
// restore writes: a file of another kind beside the marker is refused, and
// kept.
func TestRestoreRefusesAnUnfinishedRestoreWithOtherFiles(t *testing.T) {
	file, _, _ := backupOf(t, 1)
	dir := t.TempDir()
	names := []string{restoringFileName, dataFileName, "log-0000000000000001.wal", "snapshot-0000000000000001.snap", "zz-notes.txt"}
	for _, name := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("mine"), 0o600))
	}

	_, err := Restore(file, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "and zz-notes.txt, which a restore does not write")
	for _, name := range names {
		assert.FileExists(t, filepath.Join(dir, name), "a refusal removes nothing")
	}
}

// A directory that holds only a LOCK (a first start that wrote nothing,
// which the service refuses naming a restore, or a restore stopped as it
// began) is restored into.
func TestRestoreIntoADirectoryWithOnlyALock(t *testing.T) {
	file, _, rev := backupOf(t, 1, 2)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, lockFileName), nil, 0o600))
	_, err := Open(dir, Options{CommitTimeout: testCommitTimeout})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Restore them from a backup")

	got, err := Restore(file, dir)
	require.NoError(t, err)
	assert.Equal(t, rev, got)
	d := openTestDurable(t, dir, Options{})
	defer d.Close()
	members, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, members)
}

// backupOf writes a backup of a memory store whose group "g" holds uids,
// and returns its file, its bytes and its revision.
func backupOf(t *testing.T, uids ...membership.UID) (string, []byte, membership.Revision) {
	t.Helper()
	m := memory.New()
	users := make([]membership.User, len(uids))
	for i, uid := range uids {
		users[i] = membership.User{UID: uid}
	}
	_, err := storetest.Add(context.Background(), m, "g", users)
	require.NoError(t, err)
	var b bytes.Buffer
	backup := m.Backup()
	_, err = backup.WriteTo(&b)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "backup")
	require.NoError(t, os.WriteFile(file, b.Bytes(), 0o600))
	return file, b.Bytes(), backup.Revision()
}
