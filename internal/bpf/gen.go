// Package bpf holds fusescope's BPF programs and their bpf2go output. The
// generated files are committed so that `go build` needs no clang; `make
// generate` rebuilds them.
package bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type op_stats -type inflight_slot -type stats_key -type errno_key -type slow_req -type stage_stats -type daemon_thread -type node_key -type node_stats -type node_name -type page_cache_stats -type call_stats -type app_mount -type fine_stats -type drop_reason -type file_call FuseReq fusereq.bpf.c -- -I.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel FuseReqNoCAS fusereq_nocas.bpf.c -- -I.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu" -target bpfel -type sys_stats -type fd_io -type bin_stats -type sys_event -type sys_calls -type task_state SysTrace systrace.bpf.c -- -I.
//go:generate sh -c "awk -f sysnames.awk /usr/include/x86_64-linux-gnu/asm/unistd_64.h | gofmt > sysnames_amd64.go"
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type func_hist -type start_key Kfunc kfunc.bpf.c -- -I.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -type ustart -type stage_fn_key -type stage_fn -type held_request -type arg_key Ufunc ufunc.bpf.c -- -I.
