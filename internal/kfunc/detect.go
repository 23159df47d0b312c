package kfunc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
)

// How to attach (Config.Attach).
const (
	AttachAuto   = "auto"   // fentry where the kernel has it for every function, else kprobes
	AttachFentry = "fentry" // fentry/fexit only
	AttachKprobe = "kprobe" // kprobes only (kprobe.multi for the counts where the kernel has it)
)

// mechanisms is what the running kernel offers kfunc: a nil error is a
// mechanism it has, else what it lacks, in words.
type mechanisms struct {
	kprobes error
	fentry  error
}

// Where the kernel shows what it has.
var (
	kprobePMU  = "/sys/bus/event_source/devices/kprobe"
	vmlinuxBTF = "/sys/kernel/btf/vmlinux"
	moduleBTF  = "/sys/kernel/btf"
)

// detectMechanisms looks for kprobes (the kprobe PMU, or tracefs's
// kprobe_events) and fentry (the kernel's BTF, and a BPF tracing program
// that loads).
func detectMechanisms(tracefs string) mechanisms {
	var m mechanisms
	_, pmuErr := os.Stat(kprobePMU)
	_, eventsErr := os.Stat(filepath.Join(tracefs, "kprobe_events"))
	if pmuErr != nil && (tracefs == "" || eventsErr != nil) {
		m.kprobes = errors.New("no kprobe PMU or kprobe_events: built without CONFIG_KPROBES")
	}
	if _, err := os.Stat(vmlinuxBTF); err != nil {
		m.fentry = errors.New("no BTF at /sys/kernel/btf/vmlinux: built without CONFIG_DEBUG_INFO_BTF")
	} else if err := features.HaveProgramType(ebpf.Tracing); err != nil {
		m.fentry = errors.New(tracingRefusal(err))
	}
	return m
}

// tracingRefusal says why a BPF tracing program did not load.
func tracingRefusal(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, ebpf.ErrNotSupported):
		return "no BPF tracing programs (Linux 5.5)"
	case errors.As(err, &errno):
		return "BPF tracing programs refused: " + errno.Error()
	}
	return "BPF tracing programs do not load: " + err.Error()
}

// hasModuleBTF tells whether a module's types are in the kernel's BTF
// (/sys/kernel/btf/MODULE), as fentry on its functions needs.
func hasModuleBTF(module string) bool {
	if module == "" {
		return true
	}
	_, err := os.Stat(filepath.Join(moduleBTF, module))
	return err == nil
}

// refusal is the one line for a kernel without the mechanism asked for
// (or without either), with what to use instead.
func (m mechanisms) refusal(release, attach string) error {
	const instead = "count FUSE requests per opcode with fusescope trace instead (its fuse tracepoints, from Linux 6.12, need neither), or boot a kernel with kprobes"
	switch attach {
	case AttachKprobe:
		if m.kprobes != nil {
			alt := "use --attach fentry"
			if m.fentry != nil {
				alt = instead
			}
			return fmt.Errorf("kernel %s has no kprobes (%v): %s", release, m.kprobes, alt)
		}
	case AttachFentry:
		if m.fentry != nil {
			alt := "use --attach kprobe"
			if m.kprobes != nil {
				alt = instead
			}
			return fmt.Errorf("kernel %s has no fentry (%v): %s", release, m.fentry, alt)
		}
	default:
		if m.kprobes != nil && m.fentry != nil {
			return fmt.Errorf("kernel %s has neither kprobes (%v) nor fentry (%v), which kfunc attaches with: %s", release, m.kprobes, m.fentry, instead)
		}
	}
	return nil
}
