// Command tracefloor is the floor a per-run eBPF tracer of a command
// cannot go below on a machine: "run" starts the command from a Go
// process and waits for it (what any Go tool that runs a command pays);
// "bpf" first loads one program that does nothing, attaches it to the
// tp_btf sys_enter tracepoint as fusescope syscalls does, runs the
// command, then detaches (what loading anything through the kernel's BTF
// and the verifier pays, before a tracer does any work of its own).
package main

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

func main() {
	if len(os.Args) < 3 || (os.Args[1] != "run" && os.Args[1] != "bpf") {
		fmt.Fprintln(os.Stderr, "usage: tracefloor run|bpf CMD [ARGS...]")
		os.Exit(2)
	}
	if os.Args[1] == "bpf" {
		l, err := attachEmpty()
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracefloor:", err)
			os.Exit(1)
		}
		defer l.Close()
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if _, exited := err.(*exec.ExitError); !exited {
			fmt.Fprintln(os.Stderr, "tracefloor:", err)
			os.Exit(1)
		}
	}
}

// attachEmpty loads "return 0" as a tp_btf program on sys_enter.
func attachEmpty() (link.Link, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sys_enter", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return nil, err
	}
	defer prog.Close() // the link holds it
	return link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
}
