package lab

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

// What a daemon killed outright (SIGKILL, a crash) loses, as docs/labfs.md
// says: nothing that fsync or close returned for; of what neither made
// safe, up to M acknowledged writes with --write-behind M, and the dirty
// pages not yet written back with write-back caching; nothing without
// either, where every write is on the backing file when it is answered.

// crashBlock is the i-th 4 KiB block a crash test writes: its number in
// every byte pair, so a block in the wrong place shows.
func crashBlock(i int) []byte {
	return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 2048)
}

// blocksKept counts the blocks of data, written in order, that the file
// holds from its start, and says whether anything else in it is not the
// data at its place (or a hole, for pages written back out of order).
func blocksKept(data []byte, blocks int) (kept int, wrong bool) {
	for i := 0; i < blocks; i++ {
		at := i * 4096
		if at >= len(data) {
			return kept, wrong
		}
		got := data[at:min(at+4096, len(data))]
		switch {
		case bytes.Equal(got, crashBlock(i)[:len(got)]) && len(got) == 4096 && kept == i:
			kept++
		case bytes.Equal(got, crashBlock(i)[:len(got)]) || bytes.Count(got, []byte{0}) == len(got):
		default:
			wrong = true
		}
	}
	if len(data) > blocks*4096 {
		wrong = true
	}
	return kept, wrong
}

func TestLabFSKilledDaemonLosesOnlyWhatWasNotSynced(t *testing.T) {
	t.Parallel()
	const blocks = 32
	wb := []string{"--preset", "writeback"}
	behind := []string{"--preset", "nocache", "--write-behind", "8", "--latency", "write=20ms"}
	for _, c := range []struct {
		name   string
		args   []string
		synced int    // blocks fsync'ed before the rest is written
		end    string // after the last write: fsync, close, or nothing
		lose   int    // the most blocks it may lose
	}{
		{"writeback/fsync", wb, 0, "fsync", 0},
		{"writeback/close", wb, 0, "close", 0},
		{"writeback/half fsync'ed", wb, blocks / 2, "", blocks / 2},
		{"write-behind/fsync", behind, 0, "fsync", 0},
		{"write-behind/close", behind, 0, "close", 0},
		{"write-behind/nothing", behind, 0, "", 8},
		{"writeback+write-behind/close", append(wb, "--write-behind", "8", "--latency", "write=20ms"), 0, "close", 0},
		{"write-through/nothing", []string{"--preset", "default"}, 0, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, mnt := t.TempDir(), t.TempDir()
			args := append(append([]string{"fs", "mount"}, c.args...), src, mnt)
			daemon := proctest.Start(t, exec.Command(e2e.Fusescope, args...), " mounted at ", 10*time.Second)
			t.Cleanup(func() {
				if e2e.Mounted(mnt) {
					exec.Command(e2e.Fusescope, "fs", "umount", mnt).Run()
				}
			})
			f, err := os.Create(filepath.Join(mnt, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for i := 0; i < blocks; i++ {
				if i == c.synced && i > 0 {
					if err := f.Sync(); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := f.Write(crashBlock(i)); err != nil {
					t.Fatal(err)
				}
			}
			switch c.end {
			case "fsync":
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			case "close":
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			daemon.Cmd.Process.Kill()
			daemon.Wait(10 * time.Second)
			data, err := os.ReadFile(filepath.Join(src, "f"))
			if err != nil {
				t.Fatal(err)
			}
			kept, wrong := blocksKept(data, blocks)
			t.Logf("%s, SIGKILL: %d of %d blocks kept (%d bytes in SRC)", c.name, kept, blocks, len(data))
			if wrong || kept < blocks-c.lose {
				t.Errorf("after SIGKILL the source holds the first %d of %d blocks written (wrong bytes besides: %v); want %d at least, nothing else", kept, blocks, wrong, blocks-c.lose)
			}
			if c.end == "" && c.synced > 0 && kept < c.synced {
				t.Errorf("lost blocks fsync'ed before: %d kept of %d", kept, c.synced)
			}
			out, err := exec.Command(e2e.Fusescope, "fs", "umount", mnt).CombinedOutput()
			if err != nil {
				t.Errorf("fs umount of the dead mount: %v\n%s", err, out)
			}
		})
	}
}
