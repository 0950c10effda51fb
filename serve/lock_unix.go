//go:build unix

package serve

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on path (created), which one process holds at a time;
// unlock gives it back.
func lockDir(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locked: %w", err)
	}
	return func() { f.Close() }, nil
}
