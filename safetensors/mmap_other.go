//go:build !unix

package safetensors

import (
	"errors"
	"os"
)

// mmapFile is not available on this platform; Open falls back to reading the file.
func mmapFile(*os.File, int64) ([]byte, func() error, error) {
	return nil, nil, errors.New("mmap not supported on this platform")
}
