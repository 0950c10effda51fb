package mmapfile

import (
	"os"
	"syscall"
	"unsafe"
)

// DropPages advises the kernel that the mapped pages covering b will not be needed
// (MADV_DONTNEED): they leave the process's resident set, and a later read of a shared
// read-only file mapping faults them in again from the file. Errors are ignored: the
// advice only saves memory.
func DropPages(mapping, b []byte) {
	if len(b) == 0 || len(mapping) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mapping)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	lo &^= page - 1 // the mapping starts on a page, so this stays inside it
	hi = min((hi+page-1)&^(page-1), base+uintptr(len(mapping)))
	if lo < base || hi <= lo {
		return
	}
	_ = syscall.Madvise(mapping[lo-base:hi-base], syscall.MADV_DONTNEED)
}
