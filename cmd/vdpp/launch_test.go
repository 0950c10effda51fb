package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// launchCommand runs the built binary (race-enabled builds must not sleep at exit).
func launchCommand(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(vdpp(t), args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	return cmd
}

func TestRunLaunchUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", []string{"--nproc-per-node", "2"}, "no worker command"},
		{"no command after --", []string{"--nproc-per-node", "2", "--"}, "no worker command"},
		{"bad flag", []string{"--nope", "--", "version"}, "unknown flag --nope"},
		{"nproc", []string{"--nproc-per-node", "0", "--", "version"}, "--nproc-per-node 0"},
		{"node rank", []string{"--nnodes", "2", "--node-rank", "2", "--master-port", "9", "--", "version"}, "--node-rank 2"},
		{"port with nodes", []string{"--nnodes", "2", "--", "version"}, "--master-port is required"},
		{"recursive", []string{"--", "launch", "--", "version"}, "may not launch again"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runLaunch(context.Background(), tc.args, &out, &errOut)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error()+errOut.String(), tc.want) {
				t.Fatalf("err = %v (stderr %q), want usage error with %q", err, errOut.String(), tc.want)
			}
		})
	}
}

// TestLaunchVersion runs the real binary: two workers print their version, prefixed.
func TestLaunchVersion(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	cmd := launchCommand(t, "launch", "--nproc-per-node", "2", "--", "version")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstderr: %s", err, errOut.String())
	}
	for _, want := range []string{"[rank 0] vdpp ", "[rank 1] vdpp "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("stdout %q lacks %q", out.String(), want)
		}
	}
}

// TestLaunchFailingWorker: a worker that fails makes launch fail and name the rank.
func TestLaunchFailingWorker(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	cmd := launchCommand(t, "launch", "--nproc-per-node", "2", "--", "no-such-command")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err == nil || !strings.Contains(errOut.String(), "exited: exit status 2") || !strings.Contains(errOut.String(), "[rank ") {
		t.Fatalf("err = %v\nstderr: %s", err, errOut.String())
	}
}
