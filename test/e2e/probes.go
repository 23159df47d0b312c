package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ProbeWatch confines a check for BPF programs left loaded to what one
// test made, so that tests that load programs can run side by side: the
// programs loaded after the watch began (the kernel numbers programs in
// the order it loads them), held by the test's own processes or by none.
type ProbeWatch struct{ after int }

// WatchProbes notes the newest program loaded now; call it before the test
// starts what loads programs.
func WatchProbes(t testing.TB) ProbeWatch {
	t.Helper()
	progs, err := loadedPrograms()
	if err != nil {
		t.Fatal(err)
	}
	w := ProbeWatch{}
	for _, p := range progs {
		w.after = max(w.after, p.ID)
	}
	return w
}

// AssertNoneLeft checks that no program of fusescope's loaded since the
// watch began is still loaded, held by one of pids (the processes the test
// started), by one of their descendants, or by no process at all (pinned,
// or leaked by a process that is gone). Programs other processes hold are
// theirs: a test or a fusescope running beside this one.
func (w ProbeWatch) AssertNoneLeft(t testing.TB, pids ...int) {
	t.Helper()
	// The kernel frees a closed program after an RCU grace period and a
	// work item: up to a quarter of a second after the process exited
	// here. One that is still there after 5 s is held by something.
	Eventually(t, 5*time.Second, "no BPF program of the test's left loaded", func() (bool, string) {
		left, err := w.left(pids)
		if err != nil {
			t.Fatal(err)
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
}

func (w ProbeWatch) left(pids []int) ([]string, error) {
	progs, err := loadedPrograms()
	if err != nil {
		return nil, err
	}
	ours := map[int]bool{}
	for _, pid := range pids {
		ours[pid] = true
		for _, d := range DescendantsOf(pid) {
			ours[d] = true
		}
	}
	holders := progHolders()
	var left []string
	for _, p := range progs {
		if p.ID <= w.after || !fusescopeProgram(p.Name) {
			continue
		}
		held := holders[p.ID]
		if len(held) > 0 && !slices.ContainsFunc(held, func(pid int) bool { return ours[pid] }) {
			continue
		}
		left = append(left, fmt.Sprintf("%d %s held by %v", p.ID, p.Name, held))
	}
	return left, nil
}

type program struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func loadedPrograms() ([]program, error) {
	out, err := exec.Command("bpftool", "-j", "prog", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("bpftool prog show: %v", err)
	}
	var progs []program
	if err := json.Unmarshal(out, &progs); err != nil {
		return nil, fmt.Errorf("bpftool prog show: %v", err)
	}
	return progs, nil
}

func fusescopeProgram(name string) bool {
	for _, prefix := range []string{"fuse_send", "fuse_end", "fuse_names", "sys_enter", "sys_exit", "stage_", "pc_", "app_", "sched_process"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// progHolders maps each BPF program to the processes holding an fd of it
// or of a link to it (their fdinfo's prog_id).
func progHolders() map[int][]int {
	out := map[int][]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*/fdinfo/*")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(string(b), "prog_id:")
		if !ok {
			continue
		}
		id, err1 := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
		pid, err2 := strconv.Atoi(strings.Split(f, "/")[2])
		if err1 == nil && err2 == nil && !slices.Contains(out[id], pid) {
			out[id] = append(out[id], pid)
		}
	}
	return out
}
