//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// mmapFile maps the first size bytes of f read-only and shared.
func mmapFile(f *os.File, size int64) ([]byte, func() error, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
