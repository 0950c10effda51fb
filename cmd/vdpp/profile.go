package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// profileEnv names the environment variable that, when set to a file path, writes a CPU
// profile of the whole command to that file (read it with `go tool pprof`). It is an
// environment variable rather than a flag so that it works for every subcommand, including
// the workers a launcher starts (each rank appends ".rankN" from RANK).
const profileEnv = "VDPP_CPUPROFILE"

// startProfile starts the CPU profile named by VDPP_CPUPROFILE, if any, and returns the
// function that stops it.
func startProfile(stderr io.Writer) (stop func()) {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() {}
	}
	if r := os.Getenv("RANK"); r != "" {
		path += ".rank" + r
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "vdpp: %s: %v (no profile)\n", profileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		fmt.Fprintf(stderr, "vdpp: %s: %v (no profile)\n", profileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
