package video

import (
	"fmt"
	"io"

	"github.com/vdpp/vdpp/internal/atomicfile"
)

// writeFileAtomic creates path by writing to a temporary file in the same directory and
// renaming it into place; on any error the temporary file is removed and path is left
// untouched.
func writeFileAtomic(path string, write func(w io.Writer) error) error {
	if err := atomicfile.Write(path, atomicfile.Options{}, write); err != nil {
		return fmt.Errorf("video: write %s: %w", path, err)
	}
	return nil
}
