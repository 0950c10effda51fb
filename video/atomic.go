package video

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// writeFileAtomic creates path by writing to a temporary file in the same directory and
// renaming it into place; on any error the temporary file is removed and path is left
// untouched.
func writeFileAtomic(path string, write func(w io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("video: create %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil { // CreateTemp makes 0600; outputs are for sharing
		return fmt.Errorf("video: write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("video: write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("video: rename into %s: %w", path, err)
	}
	return nil
}
