//go:build !unix

package mmapfile

import (
	"errors"
	"os"
)

// Map is not available on this platform; the readers read the file instead.
func Map(*os.File, int64) ([]byte, func() error, error) {
	return nil, nil, errors.New("mmap not supported on this platform")
}
