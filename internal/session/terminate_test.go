package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// One rule for every -- CMD: a command still running when
// the run ends under it (its count reached, a SIGTERM, a second Ctrl-C)
// is ended, with the processes it started, as timeout ends its command:
// SIGTERM, then SIGKILL after the grace period; a line says so, and Run
// passes its status on. Each case's command writes the pids of its
// processes, which must all be gone when Run returns. The counts leave
// the shell time to start and set its traps under the race detector on a
// loaded machine (at 300 ms the shell was once signalled before its trap).
func TestRunEndsTheCommandItOutlives(t *testing.T) {
	for _, c := range []struct {
		name   string
		script string // the command, given $PIDS to write its processes' pids to
		cfg    Config
		// signals sent to this process once the command runs
		signals  []syscall.Signal
		wantCode int
		wantWhy  string
		wantSent string
	}{
		{"count reached", `sleep 30 & echo $! >> $PIDS; echo $$ >> $PIDS; wait`, Config{Interval: time.Second, Count: 2},
			nil, 128 + int(syscall.SIGTERM), "the run's count of 2 intervals was reached", "sent it and the process it started SIGTERM;"},
		{"SIGTERM", `sleep 30 & echo $! >> $PIDS; echo $$ >> $PIDS; wait`, Config{},
			[]syscall.Signal{syscall.SIGTERM}, 128 + int(syscall.SIGTERM), "fusescope got SIGTERM", "SIGTERM;"},
		{"second Ctrl-C to a command that ignores SIGINT", `trap "" INT; sleep 30 & echo $! >> $PIDS; echo $$ >> $PIDS; wait`, Config{},
			[]syscall.Signal{syscall.SIGINT, syscall.SIGINT}, 128 + int(syscall.SIGTERM), "fusescope got a second SIGINT", "SIGTERM;"},
		{"a command that ignores SIGTERM", `trap "" TERM; sleep 30 & echo $! >> $PIDS; echo $$ >> $PIDS; wait`, Config{Interval: 2 * time.Second, Count: 1},
			nil, 128 + int(syscall.SIGKILL), "the run's count of 1 interval was reached", "SIGTERM, and SIGKILL 2s later;"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pids := t.TempDir() + "/pids"
			t.Setenv("PIDS", pids)
			var log bytes.Buffer
			cfg := c.cfg
			cfg.Command = []string{"sh", "-c", c.script}
			cfg.Log = &log
			cfg.Ready = func() {
				if len(c.signals) == 0 {
					return
				}
				go func() {
					// The command's processes run, then each signal.
					waitForFile(t, pids, 2)
					for _, s := range c.signals {
						syscall.Kill(os.Getpid(), s)
						time.Sleep(100 * time.Millisecond)
					}
				}()
			}
			start := time.Now()
			_, err := Run(context.Background(), cfg, opener(&fakeSource{}))
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != c.wantCode {
				t.Errorf("Run: %v, want exit status %d", err, c.wantCode)
			}
			line := log.String()
			if !strings.Contains(line, "was still running when "+c.wantWhy+": ") || !strings.Contains(line, c.wantSent) {
				t.Errorf("said %q, want why (%s) and what was sent (%s)", line, c.wantWhy, c.wantSent)
			}
			b, _ := os.ReadFile(pids)
			for _, f := range strings.Fields(string(b)) {
				var pid int
				fmt.Sscan(f, &pid)
				if pid > 0 && alive(pid) {
					t.Errorf("process %d of the command still runs after Run returned (%v)", pid, time.Since(start))
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// A command that ends by itself is left to end so: nothing is sent, and
// nothing is said.
func TestRunCommandThatEndsIsNotSignalled(t *testing.T) {
	var log bytes.Buffer
	_, err := Run(context.Background(), Config{Command: []string{"true"}, Log: &log, Interval: time.Hour, Count: 5}, opener(&fakeSource{}))
	if err != nil || log.Len() > 0 {
		t.Errorf("Run: %v, said %q", err, log.String())
	}
}

func waitForFile(t *testing.T, path string, lines int) {
	for i := 0; i < 500; i++ {
		if b, _ := os.ReadFile(path); strings.Count(string(b), "\n") >= lines {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s: not %d lines within 5 s", path, lines)
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}
