//go:build unix

package mmapfile

import (
	"os"
	"syscall"
)

// Map maps the first size bytes of f read-only and shared.
func Map(f *os.File, size int64) ([]byte, func() error, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
