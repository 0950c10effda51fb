package backendspec

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Probe is how Resolve inspects the host. Every field must be set; OSProbe returns the
// real one, tests build fakes.
type Probe struct {
	// LookupEnv reads an environment variable (os.LookupEnv).
	LookupEnv func(name string) (string, bool)
	// Glob lists the paths matching a filepath.Glob pattern.
	Glob func(pattern string) ([]string, error)
	// IsFile reports whether path names an existing regular file (symlinks followed).
	IsFile func(path string) bool
	// NvidiaSMI runs `nvidia-smi -L` and returns its output; an error when the command is
	// absent or fails.
	NvidiaSMI func() (string, error)
	// Home is the user's home folder ("" when unknown).
	Home string
	// Cwd is the working folder, used to make relative plugin paths absolute.
	Cwd string
}

// OSProbe inspects the real host.
func OSProbe() Probe {
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	return Probe{
		LookupEnv: os.LookupEnv,
		Glob:      filepath.Glob,
		IsFile: func(path string) bool {
			fi, err := os.Stat(path)
			return err == nil && fi.Mode().IsRegular()
		},
		NvidiaSMI: func() (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "nvidia-smi", "-L").CombinedOutput()
			return string(out), err
		},
		Home: home,
		Cwd:  cwd,
	}
}

// getenv returns the variable's value, "" when unset.
func (p Probe) getenv(name string) string {
	v, _ := p.LookupEnv(name)
	return v
}

// glob is Glob with errors (only malformed patterns) treated as no match.
func (p Probe) glob(pattern string) []string {
	m, err := p.Glob(pattern)
	if err != nil {
		return nil
	}
	return m
}
