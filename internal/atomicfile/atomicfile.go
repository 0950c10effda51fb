// Package atomicfile writes files so that a reader sees either the old content or the whole
// new one, never a torn write: the data goes to a temporary file in the destination's
// folder, which is then renamed over the destination.
//
// Contract: on any error the temporary file is removed and the destination is untouched.
// Errors from the caller's writer are returned as they are; the package's own errors name
// the path. Files get Options.Perm (0644 when zero, so outputs are for sharing), not the
// 0600 of os.CreateTemp.
package atomicfile

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Options tune a write.
type Options struct {
	// Perm is the mode of the file; 0 means 0644.
	Perm fs.FileMode
	// Sync flushes the data to disk before the rename, for stores that must survive a
	// crash of the machine (not only of the process).
	Sync bool
}

func (o Options) perm() fs.FileMode {
	if o.Perm == 0 {
		return 0o644
	}
	return o.Perm
}

// Write creates path with what fill writes.
func Write(path string, o Options, fill func(w io.Writer) error) error {
	return WriteNamed(path, o, func(tmp string) error {
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return fmt.Errorf("atomicfile: %w", err)
		}
		if err := fill(f); err != nil {
			f.Close()
			return err
		}
		if o.Sync {
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("atomicfile: %s: %w", path, err)
			}
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("atomicfile: %s: %w", path, err)
		}
		return nil
	})
}

// WriteFile creates path holding data.
func WriteFile(path string, data []byte, o Options) error {
	return Write(path, o, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteNamed creates path from a temporary file that produce writes by name (for an
// external program such as ffmpeg). The temporary name keeps path's extension. With
// Options.Sync the file is flushed after produce returns.
func WriteNamed(path string, o Options, produce func(tmp string) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*"+filepath.Ext(base))
	if err != nil {
		return fmt.Errorf("atomicfile: create %s: %w", path, err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err = produce(tmp); err != nil {
		return err
	}
	if err = os.Chmod(tmp, o.perm()); err != nil {
		return fmt.Errorf("atomicfile: %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomicfile: rename into %s: %w", path, err)
	}
	return nil
}

// WriteJSON writes v as indented JSON (and a newline) to path, atomically.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(path, append(b, '\n'), Options{})
}
