package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/netns"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// a14bLayers is how many of an A14B expert's 40 layers the two-host test keeps: each expert
// is then about 1 GB at q8_0 (the embedders, the time projection and two blocks at the
// released widths), twice the memory of the rest of a process, so holding one expert
// instead of two shows.
const a14bLayers = 2

// TestMultiNodeA14B: two hosts each hold one expert of a Wan 2.2 A14B-shaped model (the
// released widths and heads, two layers, random weights written as q8_0 GGUF files in Wan's
// original layout, kept in q8_0 as loaded): `vdpp launch` runs `vdpp generate` as a 2-stage
// pipeline, one expert per host, and the video is the one process's with both experts bit
// for bit, while each host's peak resident memory stays under 60% of that process's.
func TestMultiNodeA14B(t *testing.T) {
	if testing.Short() {
		t.Skip("writes two 1 GB experts")
	}
	net := netns.New(t, netns.Config{Hosts: 2})
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	wantest.WriteMoEFolder(t, model, wantest.A14BConfig(a14bLayers), 1)
	cfg, err := transformer.ReadConfig(filepath.Join(model, "transformer"))
	if err != nil {
		t.Fatal(err)
	}
	high, low := filepath.Join(dir, "high.gguf"), filepath.Join(dir, "low.gguf")
	size := wantest.WriteRandomGGUF(t, cfg, high, 10)
	wantest.WriteRandomGGUF(t, cfg, low, 11)
	emb := tensor.New(8, cfg.TextDim)
	for i := range emb.Data {
		emb.Data[i] = float32(i%13)/13 - 0.5
	}
	embeds := filepath.Join(dir, "embeds.safetensors")
	if err := safetensors.WriteMapFile(embeds, map[string]*tensor.Dense{"prompt_embeds": emb}, nil); err != nil {
		t.Fatal(err)
	}
	args := []string{"generate", "--model", model, "--transformer", high, "--transformer-2", low, "--prompt-embeds", embeds,
		"--negative-prompt-embeds", embeds, "--num-frames", "5", "--height", "32", "--width", "32", "--steps", "4",
		"--guidance-scale", "4", "--seed", "5", "--quiet"}

	// The binary without the race detector: what is checked is the frames and each
	// process's resident memory (the detector's shadow memory would blur it), and vdpp's
	// own kernels run several times slower instrumented (a built-in Wan generation: 4 to 7
	// times); the launch across hosts runs under the detector in the other multi-node tests.
	bin := vdppPlain(t)
	oneDir := filepath.Join(dir, "one")
	oneFile := filepath.Join(dir, "rss-one")
	cmd := exec.Command(peakRSSOf(t, bin, oneFile), append(append([]string(nil), args...), "--nproc", "1", "--out", oneDir)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vdpp generate (one process): %v\n%s", err, out)
	}
	oneRSS := readPeakRSS(t, oneFile)

	multi := filepath.Join(dir, "multi")
	margs := append(append([]string(nil), args...), "--out", multi)
	n0 := startNodeBin(t, peakRSSOf(t, bin, filepath.Join(dir, "rss0")), net.Hosts, 0, 1, margs...)
	n1 := startNodeBin(t, peakRSSOf(t, bin, filepath.Join(dir, "rss1")), net.Hosts, 1, 1, margs...)
	waitAll(t, 5*time.Minute, n0, n1)
	requireSameFrames(t, oneDir, multi, "sample-000", 5, "one expert on each of 2 hosts")

	var rep struct {
		Stages []struct {
			Rank    int              `json:"rank"`
			Weights map[string]int64 `json:"weight_bytes"`
			Types   map[string]int64 `json:"weight_bytes_by_type"`
		} `json:"stages"`
	}
	data, err := os.ReadFile(filepath.Join(multi, "sample-000", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 2 || rep.Stages[0].Weights["transformer_2"] != 0 || rep.Stages[1].Weights["transformer"] != 0 ||
		rep.Stages[0].Types["q8_0"] < size*9/10 || rep.Stages[1].Types["q8_0"] < size*9/10 {
		t.Fatalf("stages hold %+v, want one expert each, in q8_0 (a file is %d bytes)", rep.Stages, size)
	}
	for i, n := range []*node{n0, n1} {
		rss := readPeakRSS(t, filepath.Join(dir, "rss"+strconv.Itoa(i)))
		t.Logf("host %d: peak RSS %d MB, the one process %d MB (%.0f%%)", n.host.Index, rss>>20, oneRSS>>20, 100*float64(rss)/float64(oneRSS))
		if rss <= 0 || oneRSS <= 0 || float64(rss) >= 0.6*float64(oneRSS) {
			t.Errorf("host %d: peak RSS %d MB, not under 60%% of the one process's %d MB", n.host.Index, rss>>20, oneRSS>>20)
		}
	}
}

// peakRSSEnv names the file that the test binary, started with it set, writes the peak
// resident memory of the command its arguments name to (see TestMain).
const peakRSSEnv = "VDPP_TEST_PEAK_RSS_FILE"

// peakRSSOf returns a wrapper for a node's binary bin: the test binary itself, which runs
// bin with the node's arguments and writes the peak resident memory of bin's process tree
// to file. A process this test starts directly reports at least the test process's own
// peak: Go starts children with vfork, and Linux carries the parent's high-water mark into
// the child's ru_maxrss when it execs, so after the test binary wrote two 1 GB files (and
// ran whatever tests came before, under the race detector's shadow memory in a -race run) a
// host of 1.1 GB read as 1.46 GB. The wrapper is a fresh, small process, and the vdpp it
// starts inherits only that.
func peakRSSOf(t *testing.T, bin, file string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "peakrss")
	script := "#!/bin/sh\nexec env " + peakRSSEnv + "='" + file + "' '" + self + "' '" + bin + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// readPeakRSS reads what a peakRSSOf wrapper wrote, in bytes.
func readPeakRSS(t *testing.T, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
}

// runPeakRSS is the test binary as a peakRSSOf wrapper: it runs args (killed if the
// wrapper dies), writes the peak resident memory of its process tree to file and exits
// with its status.
func runPeakRSS(file string, args []string) int {
	runtime.LockOSThread() // Pdeathsig follows the thread that started the child
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "peak RSS wrapper:", err)
		return 2
	}
	if werr := os.WriteFile(file, []byte(strconv.FormatInt(maxRSS(cmd.ProcessState), 10)), 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, "peak RSS wrapper:", werr)
		return 2
	}
	return cmd.ProcessState.ExitCode()
}

// maxRSS is the peak resident memory of a finished process and of the children it waited
// for (getrusage's ru_maxrss, in bytes).
func maxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return ru.Maxrss << 10
}
