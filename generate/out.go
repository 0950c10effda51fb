package generate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// LogFile is the log a run writes in its output folder when the terminal shows a bar (or
// with --quiet).
const LogFile = "generate.log"

// DefaultOutRoot is where a run without --out gets a fresh numbered folder (run-001, ...).
const DefaultOutRoot = "out"

// sampleDir matches the sample folders a run writes.
var sampleDir = regexp.MustCompile(`^sample-\d{3,}$`)

// runDir matches the numbered run folders under DefaultOutRoot.
var runDir = regexp.MustCompile(`^run-(\d{3,})$`)

// PrepareOut picks and prepares the output folder so that runs never mix: without --out a
// fresh numbered folder under out/ (run-001, run-002, ...); with --out DIR, DIR must be
// empty or absent, or --overwrite removes what a run writes there (sample-NNN folders and
// generate.log; other files stay). It returns the options with the folder and a line
// saying where the run writes.
func PrepareOut(o Options) (Options, string, error) {
	if o.Out == "" {
		dir, err := freshRunDir(DefaultOutRoot)
		if err != nil {
			return o, "", err
		}
		o.Out = dir
		return o, fmt.Sprintf("generate: writing to %s (a fresh run folder; --out DIR picks one)", dir), nil
	}
	ents, err := os.ReadDir(o.Out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return o, "", fmt.Errorf("generate: --out: %w", err)
		}
		return o, "generate: writing to " + o.Out, nil
	case err != nil:
		return o, "", badOptions("--out %s: %w", o.Out, err)
	case len(ents) == 0:
		return o, "generate: writing to " + o.Out, nil
	case !o.Overwrite:
		return o, "", badOptions("--out %s is not empty (it holds %s): give --overwrite to replace the run there, or another --out (without --out each run gets a fresh %s/run-NNN)",
			o.Out, ents[0].Name(), DefaultOutRoot)
	}
	removed := 0
	for _, e := range ents {
		if e.Name() != LogFile && !(e.IsDir() && sampleDir.MatchString(e.Name())) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(o.Out, e.Name())); err != nil {
			return o, "", fmt.Errorf("generate: --overwrite: %w", err)
		}
		if e.IsDir() {
			removed++
		}
	}
	return o, fmt.Sprintf("generate: writing to %s (--overwrite: removed %d sample folders of an earlier run)", o.Out, removed), nil
}

// freshRunDir creates root/run-NNN with the next number after the highest there.
func freshRunDir(root string) (string, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("generate: %w", err)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return "", fmt.Errorf("generate: %w", err)
	}
	next := 1
	for _, e := range ents {
		if m := runDir.FindStringSubmatch(e.Name()); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n >= next {
				next = n + 1
			}
		}
	}
	for ; ; next++ {
		dir := filepath.Join(root, fmt.Sprintf("run-%03d", next))
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) { // a concurrent run took it: try the next
			return "", fmt.Errorf("generate: %w", err)
		}
	}
}
