package session

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The gate as a program of its own: fusescope re-executed as the gate
// spends ~5 ms starting the Go runtime and its packages before it waits,
// which a run on pre-loaded programs (syscalls --serve) waits for. This
// one is 200 bytes of x86-64 in a memfd: it writes one byte to the gate's
// socket (it runs: its own exec, which no source may count, is over),
// reads one (the release), closes it and executes the command, in well
// under a millisecond.
// Its arguments are the command's path, then the command's argv (argv[0]
// as given); the environment passes through untouched.

const gateBase = 0x400000 // where its one segment is loaded

var gateFailed = []byte("fusescope: the kernel would not execute the command\n")

// gateProgram is the gate's ELF image for its socket at fd.
func gateProgram(fd int) []byte {
	const headers = 64 + 56 // the ELF header and one program header
	imm := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	var code []byte
	emit := func(b ...[]byte) {
		for _, x := range b {
			code = append(code, x...)
		}
	}
	var gaveUp []int // the ends of the jumps to gave_up, patched below
	// One byte each way on the socket: "running" (the exec is over), then
	// the release.
	for _, call := range []uint32{1, 0} { // write, then read
		emit([]byte{0xb8}, imm(call))              // mov eax, call
		emit([]byte{0xbf}, imm(uint32(fd)))        // mov edi, fd
		emit([]byte{0x48, 0x8d, 0x74, 0x24, 0xf0}) // lea rsi, [rsp-16]
		emit([]byte{0xba}, imm(1))                 // mov edx, 1
		emit([]byte{0x0f, 0x05})                   // syscall
		emit([]byte{0x48, 0x83, 0xf8, 0x01})       // cmp rax, 1
		emit([]byte{0x75, 0x00})                   // jne gave_up
		gaveUp = append(gaveUp, len(code))
	}
	emit([]byte{0xb8}, imm(3))                 // mov eax, 3: close
	emit([]byte{0xbf}, imm(uint32(fd)))        // mov edi, fd
	emit([]byte{0x0f, 0x05})                   // syscall
	emit([]byte{0x48, 0x8b, 0x7c, 0x24, 0x10}) // mov rdi, [rsp+16]: argv[1], the path
	emit([]byte{0x48, 0x8d, 0x74, 0x24, 0x18}) // lea rsi, [rsp+24]: &argv[2], the command's argv
	emit([]byte{0x48, 0x8b, 0x0c, 0x24})       // mov rcx, [rsp]: argc
	emit([]byte{0x48, 0x8d, 0x54, 0xcc, 0x10}) // lea rdx, [rsp+rcx*8+16]: envp
	emit([]byte{0xb8}, imm(59))                // mov eax, 59: execve
	emit([]byte{0x0f, 0x05})                   // syscall
	emit([]byte{0xb8}, imm(1))                 // mov eax, 1: write, as execve failed
	emit([]byte{0xbf}, imm(2))                 // mov edi, 2
	emit([]byte{0x48, 0x8d, 0x35}, imm(0))     // lea rsi, [rip+message] (patched below)
	lea := len(code)
	emit([]byte{0xba}, imm(uint32(len(gateFailed)))) // mov edx, len
	emit([]byte{0x0f, 0x05})                         // syscall
	for _, j := range gaveUp {                       // gave_up: the run ended before the release
		code[j-1] = byte(len(code) - j)
	}
	emit([]byte{0xbf}, imm(127)) // mov edi, 127
	emit([]byte{0xb8}, imm(231)) // mov eax, 231: exit_group
	emit([]byte{0x0f, 0x05})     // syscall
	binary.LittleEndian.PutUint32(code[lea-4:], uint32(len(code)-lea))
	code = append(code, gateFailed...)

	size := uint64(headers + len(code))
	elf := make([]byte, 0, size)
	le := binary.LittleEndian
	elf = append(elf, 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0) // 64-bit, little-endian, SysV
	elf = le.AppendUint16(elf, 2)                                              // ET_EXEC
	elf = le.AppendUint16(elf, 0x3e)                                           // x86-64
	elf = le.AppendUint32(elf, 1)
	elf = le.AppendUint64(elf, gateBase+headers) // the entry: the code after the headers
	elf = le.AppendUint64(elf, 64)               // program headers' offset
	elf = le.AppendUint64(elf, 0)                // no sections
	elf = le.AppendUint32(elf, 0)
	elf = le.AppendUint16(elf, 64) // header size
	elf = le.AppendUint16(elf, 56) // program header size
	elf = le.AppendUint16(elf, 1)
	elf = le.AppendUint16(elf, 0)
	elf = le.AppendUint16(elf, 0)
	elf = le.AppendUint16(elf, 0)
	elf = le.AppendUint32(elf, 1) // PT_LOAD
	elf = le.AppendUint32(elf, 5) // read and execute
	elf = le.AppendUint64(elf, 0)
	elf = le.AppendUint64(elf, gateBase)
	elf = le.AppendUint64(elf, gateBase)
	elf = le.AppendUint64(elf, size)
	elf = le.AppendUint64(elf, size)
	elf = le.AppendUint64(elf, 0x1000)
	return append(elf, code...)
}

// newGate writes the gate for its socket at fd into a memfd; the caller
// executes it through fusescope's own fd table (/proc/PID/fd/N: the
// child's is rearranged before its exec) and closes it once it runs.
func newGate(fd int) (*os.File, error) {
	mfd, err := unix.MemfdCreate("fusescope-gate", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if err == unix.EINVAL { // before Linux 6.3, every memfd may be executed
		mfd, err = unix.MemfdCreate("fusescope-gate", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(mfd), "fusescope-gate")
	if _, err := f.Write(gateProgram(fd)); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the gate: %w", err)
	}
	return f, nil
}
