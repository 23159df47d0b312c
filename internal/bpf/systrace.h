/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Structs shared by systrace.bpf.c and its Go loader (bpf2go generates the Go
 * side from this file's BTF). x86-64 system call numbers. */
#ifndef FUSESCOPE_SYSTRACE_H
#define FUSESCOPE_SYSTRACE_H

#define TASK_SLOTS 65536 /* per-thread state, by tid mod TASK_SLOTS */
#define MAX_NR 512       /* system call numbers counted (x86-64 uses < 470) */
#define MAX_TSLOTS 256   /* live threads with their own per-call counters (slots of exited ones are reused) */
#define MAX_PSLOTS 64    /* live processes with per-fd counters (likewise) */
#define NR_WORDS (MAX_NR / 64) /* words of a thread's bitmap of system calls counted */
#define MAX_FDS 256      /* fds with per-fd counters */
#define FD_WORDS (MAX_PSLOTS * MAX_FDS / 64) /* words of the bitmap of fds counted, by process slot */
#define IO_KINDS 22      /* read, write, pread64..., then the transfer calls' second fds (ioKinds, peerKinds in the loader) */
#define MAX_BINS 4096    /* timeline bins */
#define ERRNO_SLOTS 160  /* failed calls by errno: 1-143 at themselves, the kernel's restart codes 512-527 (ERESTARTSYS...) at 144-159, any other at 0 */
#define CATEGORIES 8
#define STR_LEN 256
#define ARGV_LEN 512 /* bytes of an exec's arguments sent, in place of flushed[] (IO_KINDS * 32 bytes) */
#define RINGBUF_BYTES (16 << 20)
#define RARE_IF_DUP 2    /* rare[nr]: sent whole only when its second argument is F_DUPFD or F_DUPFD_CLOEXEC (fcntl) */
#define RARE_IF_MISSING 4 /* rare[nr]: sent whole, with its path, only when it failed with ENOENT (stat, access, readlink: a search path's probes) */
#define RARE_IF_COUNTED 3 /* rare[nr]: sent whole only when the fd in its first argument has counters to move (close) */
#define HANDED_TSLOT 1   /* sys_event.handed_over: the thread's per-call counters */
#define HANDED_PSLOT 2   /* and its process's per-fd counters */
#define F_DUPFD 0
#define F_DUPFD_CLOEXEC 1030

/* Indices of the drops counters. */
enum sys_drop_reason {
	SDROP_RINGBUF = 0,   /* a call to be sent whole found the ring buffer full: counted only */
	SDROP_TSLOTS = 1,    /* threads beyond MAX_TSLOTS - 1 alive at once: their calls share the last slot */
	SDROP_FD_RANGE = 2,  /* I/O on an fd >= MAX_FDS or in a process beyond MAX_PSLOTS alive at once: no per-fd counters */
	SDROP_NR_RANGE = 3,  /* a system call number >= MAX_NR */
	SDROP_NO_STORAGE = 4,/* two traced threads with the same tid mod TASK_SLOTS: the first is lost */
	SDROP_BINS = 5,      /* calls after the last timeline bin, counted in it */
	SDROP_REASONS = 6,
};

enum sys_event_kind {
	SEV_SYSCALL = 1, /* one call, sent whole: rare calls and calls longer than detail_ns */
	SEV_FORK = 2,    /* a traced task created a task */
	SEV_EXEC = 3,    /* a traced task executed a program */
	SEV_EXIT = 4,    /* a traced task exited; ret 1: its process with it */
	SEV_ADOPT = 5,   /* a thread of the -p process made its first traced call */
	SEV_FD_IO = 6,   /* a dead process's counters of one fd (flushed_fd), handed over at its exit */
	SEV_CALLS = 7,   /* an exited thread's counters of one system call (struct sys_calls) */
};

struct sys_stats {
	__u64 calls;
	__u64 errors;
	__u64 ns;
};

struct fd_io {
	__u64 calls;
	__u64 errors;
	__u64 bytes;
	__u64 ns;
};

struct bin_stats {
	__u64 calls;
	__u64 ns;
};

/* The per-thread state. */
struct task_state {
	__u64 start_ns; /* entry of the call in progress; 0 when none */
	__u32 tid;      /* the thread that owns the slot; 0: free */
	__u32 tslot;    /* index of this thread's per-call counters */
	__u32 pslot;    /* index of this process's per-fd counters */
	__u32 nr;       /* of the call in progress: rt_sigreturn leaves orig_ax at -1 */
};

/* Every ring buffer record starts with its kind (enum sys_event_kind). */
struct sys_event {
	__u32 kind;
	__u32 nr;
	__u32 pid;      /* tgid */
	__u32 tid;
	__u64 ts;       /* entry, CLOCK_MONOTONIC ns */
	__u64 dur;      /* ns */
	__s64 ret;
	__u64 args[6];
	__u32 child_pid;
	__u32 child_tid;
	__u32 tslot;
	__u32 pslot;
	__s32 exit_code;
	__u32 str_len;     /* bytes of str filled in */
	__u32 handed_over;   /* exit: HANDED_TSLOT, HANDED_PSLOT: those counters came before it and the slot is free again */
	__s32 flushed_fd;    /* -1: no fd's counters travel with this call */
	__u32 flushed_mask;  /* bit k: flushed[k] holds counters; the others are not written */
	struct fd_io flushed[IO_KINDS]; /* that fd's counters up to this call */
	char str[STR_LEN];              /* a path, a sockaddr, a pair of fds, a program */
};

/* SEV_CALLS: small, as a thread hands over one per system call it made. */
struct sys_calls {
	__u32 kind;
	__u32 nr;
	__u32 pid;      /* tgid */
	__u32 tid;
	__u64 calls;
	__u64 errors;
	__u64 ns;
};

#endif
