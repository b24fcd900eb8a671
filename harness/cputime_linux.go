package harness

import (
	"syscall"
	"unsafe"
)

// cpuTime is the process's CPU time so far in ns, all its threads, user
// and system (CLOCK_PROCESS_CPUTIME_ID, which the vDSO does not serve: a
// system call, about a microsecond); 0 if it cannot be read.
func cpuTime() int64 {
	const processCPUTime = 2 // CLOCK_PROCESS_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, processCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return ts.Nano()
}
