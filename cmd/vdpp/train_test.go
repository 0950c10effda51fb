package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/internal/wait"
)

// TestTrainInitFromBuiltinRoundTrip: a UNet phase seeded from the shipped model on a fresh
// run folder (no VAE checkpoint of its own) and exported unchanged gives the shipped
// weights and sampling defaults back byte for byte, so `--init-from builtin` continues
// exactly what ships and `--model OUT` samples as `--model builtin`.
func TestTrainInitFromBuiltinRoundTrip(t *testing.T) {
	dir, out := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "model")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"train", "--dir", dir, "--phase", "unet", "--init-from", "builtin", "--steps", "0"}, &stdout, &stderr); code != 0 {
		t.Fatalf("train: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "nothing to train") || !strings.Contains(stderr.String(), "frozen VAE taken from") {
		t.Fatalf("train output does not say what it did:\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"train", "--dir", dir, "--export", out, "--export-only"}, &stdout, &stderr); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr.String())
	}
	shipped, err := builtin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"unet/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors", "image_encoder/model.safetensors", "vdpp_sampling.json"} {
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(shipped, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the export of the seeded run differs from the shipped file", f)
		}
	}
}

// microTrainArgs are the flags of a tiny VAE run (networks of testdata/train-micro.json,
// 8x8 crops of 2 frames, batch 4): a step takes a fraction of a second.
func microTrainArgs(dir string, extra ...string) []string {
	return append([]string{"train", "--configs", filepath.Join("testdata", "train-micro.json"), "--dir", dir, "--phase", "vae",
		"--vae-frames", "2", "--vae-crop", "8", "--train-clips", "8", "--batch", "4", "--steps", "12", "--checkpoint-every", "4"}, extra...)
}

// trainLosses returns the loss log of a run folder as "step loss mse" lines.
func trainLosses(t *testing.T, dir string) []string {
	t.Helper()
	out, err := readLosses(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readLosses is trainLosses returning its error.
func readLosses(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "loss.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ln := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l struct {
			Step      int
			Loss, MSE float64
		}
		if err := json.Unmarshal([]byte(ln), &l); err != nil {
			return nil, fmt.Errorf("%s: %v", ln, err)
		}
		out = append(out, fmt.Sprintf("%d %v %v", l.Step, l.Loss, l.MSE))
	}
	return out, nil
}

// startTrain starts the real binary with args and returns it with its combined output.
func startTrain(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(vdpp(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range childPIDs(cmd.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
	})
	return cmd, &out
}

// rankPID waits for the child of launcher pid that runs rank (its RANK variable).
func rankPID(t *testing.T, launcher int, rank string) int {
	t.Helper()
	var pid int
	if !wait.For(30*time.Second, func() bool {
		for _, p := range childPIDs(launcher) {
			if envOf(p, "RANK") == rank {
				pid = p
			}
		}
		return pid != 0
	}) {
		t.Fatalf("no rank %s process under %d", rank, launcher)
	}
	return pid
}

// waitSteps waits until the loss log of the run in dir has n steps; out is the run's
// output, shown if it never does.
func waitSteps(t *testing.T, dir string, n int, out fmt.Stringer) {
	t.Helper()
	if !wait.For(120*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "loss.jsonl"))
		return bytes.Count(b, []byte("\n")) >= n
	}) {
		t.Fatalf("the run never reached step %d; output:\n%s", n, out.String())
	}
}

// waitExit waits at most limit for cmd to exit and returns how long it took and its error.
func waitExit(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(limit):
		t.Fatalf("still running %s later; output:\n%s", limit, out.String())
	}
	return 0, nil
}

// TestTrainKillAndResume: a rank of a 2-process run killed with SIGKILL mid-run ends the
// run within seconds with an error naming it; `--resume` continues from the last
// checkpoint, and the loss of every step (those before the kill and after) equals the loss
// of one process trained without interruption.
func TestTrainKillAndResume(t *testing.T) {
	t.Parallel()
	// The uninterrupted run, one process, runs beside the two killed ones; each compares
	// with it once it is done.
	whole := filepath.Join(t.TempDir(), "whole")
	ref := exec.Command(vdpp(t), microTrainArgs(whole)...)
	var refOut bytes.Buffer
	ref.Stdout, ref.Stderr = &refOut, &refOut
	if err := ref.Start(); err != nil {
		t.Fatal(err)
	}
	uninterrupted := sync.OnceValues(func() ([]string, error) {
		if err := ref.Wait(); err != nil {
			return nil, fmt.Errorf("uninterrupted run: %v\n%s", err, refOut.String())
		}
		return readLosses(whole)
	})
	t.Cleanup(func() {
		ref.Process.Kill()
		uninterrupted()
	})
	for _, victim := range []string{"1", "0"} {
		t.Run("kill rank "+victim, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "run")
			cmd, out := startTrain(t, microTrainArgs(dir, "--nproc", "2")...)
			pid := rankPID(t, cmd.Process.Pid, victim)
			waitSteps(t, dir, 6, out) // past the first checkpoint (step 4), in the middle of the run
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			took, err := waitExit(t, cmd, out, 20*time.Second)
			if err == nil {
				t.Fatalf("the run succeeded after rank %s was killed", victim)
			}
			if !strings.Contains(out.String(), "rank "+victim+" exited: signal: killed") {
				t.Fatalf("the error does not name rank %s:\n%s", victim, out.String())
			}
			t.Logf("ended %v after the kill", took.Round(time.Millisecond))

			cmd, out = startTrain(t, microTrainArgs(dir, "--nproc", "2", "--resume")...)
			if _, err := waitExit(t, cmd, out, 3*time.Minute); err != nil {
				t.Fatalf("resume: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "trained vae steps 8 -> 12") && !strings.Contains(out.String(), "trained vae steps 4 -> 12") {
				t.Fatalf("the resumed run did not continue from a checkpoint:\n%s", out.String())
			}
			want, err := uninterrupted()
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != 12 {
				t.Fatalf("uninterrupted run logged %d steps", len(want))
			}
			got := trainLosses(t, dir)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("losses after kill and resume:\n%s\nuninterrupted:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestTrainStoppedRankIsNamed: a rank stopped (SIGSTOP: alive but silent) ends the run
// within seconds of the heartbeat timeout, the error naming it, and no process is left.
func TestTrainStoppedRankIsNamed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	cmd, out := startTrain(t, microTrainArgs(dir, "--nproc", "2", "--heartbeat-timeout", "2s", "--steps", "1000")...)
	pid := rankPID(t, cmd.Process.Pid, "1")
	all := append(childPIDs(cmd.Process.Pid), cmd.Process.Pid)
	waitSteps(t, dir, 2, out)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	took, err := waitExit(t, cmd, out, 30*time.Second)
	if err == nil {
		t.Fatal("the run succeeded with a stopped rank")
	}
	if !strings.Contains(out.String(), "lost rank 1") || !strings.Contains(out.String(), "no heartbeat or data for 2s") {
		t.Fatalf("the error does not name rank 1:\n%s", out.String())
	}
	t.Logf("ended %v after the stop", took.Round(time.Millisecond))
	if !wait.For(10*time.Second, func() bool { return !anyAlive(all) }) {
		t.Fatalf("processes left behind: %v", all)
	}
}
