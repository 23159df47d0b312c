# fusescope. `make demo` and `make test` are the two commands a fresh machine
# needs; every other target is for development.
SHELL := /bin/bash
GO ?= go
BIN := bin/fusescope
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
TOOLS := $(CURDIR)/.cache/bin
STATICCHECK_VERSION := v0.8.2
GOTESTSUM_VERSION := v1.13.0
export PATH := $(TOOLS):$(PATH)

DEPS_GENERATE := clang:clang llvm-strip:llvm /usr/include/bpf/bpf_helpers.h:libbpf-dev \
	/usr/include/x86_64-linux-gnu/asm/types.h:linux-libc-dev
DEPS_RUN := bindfs:bindfs fusermount3:fuse3 python3:python3 pkill:procps
DEPS_TEST := $(DEPS_RUN) bpftrace:bpftrace bpftool:bpftool git:git fio:fio setpriv:util-linux strace:strace setfacl:acl rsync:rsync sqlite3:sqlite3 \
	gcc:gcc sshfs:sshfs /usr/sbin/sshd:openssh-server ssh-keygen:openssh-client prometheus:prometheus promtool:prometheus chromium:chromium tmux:tmux
DEPS_BENCH := $(DEPS_TEST) hyperfine:hyperfine

.PHONY: all build release generate vmlinux check-generated lint test test-packages test-kernels-quick unit e2e test-kernels bench demo deps clean peers

all: build

# One static binary (no cgo: no libc to match) that runs on every
# distribution and kernel; the kernel matrix boots it in each guest.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/fusescope

# The binary to ship, with its version and a SHA-256 checksum beside it;
# its last line is its path (test/kernels/run.sh reads it).
RELEASE := dist/fusescope-$(VERSION)-linux-amd64
release:
	@mkdir -p dist
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(RELEASE) ./cmd/fusescope
	cd dist && sha256sum $(notdir $(RELEASE)) >$(notdir $(RELEASE)).sha256
	@echo $(RELEASE)

# Rebuild the BPF objects and their Go bindings (bpf2go); the output is
# committed so that `go build` needs no clang.
generate:
	@scripts/deps.sh $(DEPS_GENERATE)
	$(GO) generate ./internal/bpf/

# The kernel types the BPF programs read, from the running kernel's BTF,
# trimmed (internal/bpf/vmlinuxgen): rebuilt by hand when the programs
# read a new type, as libbpf-tools rebuild theirs; committed, so that make
# generate gives the same objects on every kernel. Where a type's layout
# changed across kernels, internal/bpf/kernel.bpf.h names the other.
VMLINUX_TYPES := fuse_req fuse_in_header fuse_out_header fuse_conn fuse_mount fuse_args fuse_arg fuse_in_arg fuse_copy_state \
	fuse_dev fuse_opcode trace_event_raw_fuse_request_send trace_event_raw_fuse_request_end \
	trace_event_raw_mm_filemap_op_page_cache trace_event_raw_page_cache_ra_op super_block inode address_space \
	file fdtable files_struct task_struct fs_struct path vfsmount pt_regs \
	bpf_map_type BPF_ANY BPF_F_MMAPABLE BPF_RB_NO_WAKEUP __be16 __be32 __wsum __s8 __s16 __s32 __s64 __u8 __u16 __u32 __u64
vmlinux:
	@scripts/deps.sh $(DEPS_GENERATE)
	$(GO) run ./internal/bpf/vmlinuxgen -o internal/bpf/vmlinux.h $(VMLINUX_TYPES)

# Fails when the committed bpf2go output is not what the sources produce.
check-generated: generate
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  if ! git diff --quiet -- internal/bpf || [ -n "$$(git ls-files --others --exclude-standard internal/bpf)" ]; then \
	    git --no-pager diff --stat -- internal/bpf; \
	    echo "internal/bpf: generated files are stale: commit the output of make generate" >&2; exit 1; \
	  fi; \
	fi

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# make test's progress: a line per test as it ends, the output of those
# that fail.
$(TOOLS)/gotestsum:
	GOBIN=$(TOOLS) $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION)

lint: $(TOOLS)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change: $$out" >&2; exit 1; fi
	$(GO) vet ./...
	staticcheck ./...

unit:
	$(GO) test -race -count=1 ./internal/... ./cmd/...

# End-to-end tests mount FUSE file systems and load BPF programs: root only.
e2e: build
	@scripts/deps.sh $(DEPS_TEST)
	@scripts/libfuse-examples.sh
	$(GO) test -count=1 -timeout 30m ./test/...

# With the race detector (it needs cgo, hence gcc): the lab file system and
# the test file systems run inside the test processes, under real workloads.
# The tests spend much of their time waiting (on daemons, injected
# latencies, guests), so the packages run side by side (-p 4: the
# end-to-end tests are four packages, test/e2e/...), four of a package's
# parallel tests at a time (-parallel 4, not one per core), and the lint
# and the kernel matrix's quick pass run beside them; make test fails if
# any of the three does, once all three have ended. test/guest's tests on
# this machine hold latencies to 5% of what was injected, which the others'
# load exceeds: they run alone, last (25 s).
test: $(TOOLS)/gotestsum $(TOOLS)/staticcheck
	@scripts/deps.sh $(DEPS_TEST) $(DEPS_GENERATE) $(DEPS_KERNELS)
	@scripts/libfuse-examples.sh
	$(MAKE) --no-print-directory check-generated
	$(MAKE) --no-print-directory -j3 lint test-packages test-kernels-quick
	$(GO) test -race -count=1 ./test/guest/

test-packages: $(TOOLS)/gotestsum
	gotestsum --format testname -- -race -count=1 -p 4 -parallel 4 -timeout 40m $$($(GO) list ./... | grep -v '/test/guest$$')

test-kernels-quick:
	test/kernels/run.sh --quick

# The kernel matrix: Debian's 5.10 to the newest trixie-backports kernel,
# each booted under qemu with test/guest's tests inside (docs/kernels.md;
# about 600 MB of downloads the first time, into .cache/kernels). make test
# runs its quick pass.
DEPS_KERNELS := qemu-system-x86_64:qemu-system-x86 busybox:busybox-static zstd:zstd xz:xz-utils python3:python3 dpkg-deb:dpkg
test-kernels:
	@scripts/deps.sh $(DEPS_KERNELS)
	test/kernels/run.sh

# Benchmarks, not tests: they print the tables of docs/performance.md.
# The peers fusescope bench's presets compare with: go-fuse's loopback
# example and libfuse 3.18's passthrough_hp (from Debian sid's fuse3 source),
# in .cache/peers, which make bench puts on PATH.
PEERS := $(CURDIR)/.cache/peers
peers:
	@scripts/libfuse-examples.sh
	@mkdir -p $(PEERS)
	$(GO) build -o $(PEERS)/gofuse-loopback ./test/bench/loopback
	ln -sf $(CURDIR)/.cache/libfuse/build/example/passthrough_hp $(PEERS)/passthrough_hp
	@echo "peers built: PATH=$(PEERS):\$$PATH fusescope bench --preset passthrough"

bench: build peers
	@scripts/deps.sh $(DEPS_BENCH)
	@command -v cargo >/dev/null && { command -v strace-analyzer >/dev/null || [ -x $$HOME/.cargo/bin/strace-analyzer ] || cargo install -q strace-analyzer; } || true
	PATH=$(PEERS):$$PATH FUSESCOPE_BENCH=1 $(GO) test -count=1 -timeout 90m -run 'Bench' -v ./test/bench/ | grep -v '^=== RUN'

demo: build
	@scripts/deps.sh $(DEPS_RUN)
	@scripts/demo.sh $(BIN)

clean:
	rm -rf bin dist .cache
