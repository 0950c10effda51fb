// Command wanbench times vdpp's Wan transformer on a folder written by
// scripts/wanref/transformer_speed.py (config.json, weights, inputs.safetensors and the
// PyTorch output torch_output.safetensors) and prints one JSON line: every call's wall and
// process CPU milliseconds (user + system, all threads), their minimum and median, and the
// output's relative L2 to PyTorch's.
//
//	go run ./scripts/wanref/wanbench -dir DIR [-iters 3] [-cpuprofile FILE]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func readAll(path string) (map[string]*tensor.Dense, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*tensor.Dense{}
	for _, n := range f.Names() {
		if out[n], err = f.Tensor(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	dir := flag.String("dir", "", "folder written by transformer_speed.py")
	iters := flag.Int("iters", 3, "timed calls after one warm-up call (which compiles)")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the timed calls")
	flag.Parse()
	if err := run(*dir, *iters, *prof); err != nil {
		fmt.Fprintln(os.Stderr, "wanbench:", err)
		os.Exit(1)
	}
}

func run(dir string, iters int, prof string) error {
	b, err := nn.NewBackend("go")
	if err != nil {
		return err
	}
	t0 := time.Now()
	m, err := transformer.Load(dir, "", b)
	if err != nil {
		return err
	}
	defer m.Close()
	load := time.Since(t0)
	in, err := readAll(filepath.Join(dir, "inputs.safetensors"))
	if err != nil {
		return err
	}
	ref, err := readAll(filepath.Join(dir, "torch_output.safetensors"))
	if err != nil {
		return err
	}
	var cpu []float64 // process CPU time (user + system, all threads) of each call
	call := func() (*tensor.Dense, time.Duration, error) {
		c0 := cpuTime()
		s := time.Now()
		out, err := m.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
		d := time.Since(s)
		cpu = append(cpu, float64((cpuTime()-c0).Microseconds())/1000)
		return out, d, err
	}
	_, warm, err := call()
	cpu = cpu[:0]
	if err != nil {
		return err
	}
	if prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var ms []float64
	var out *tensor.Dense
	for range iters {
		var d time.Duration
		if out, d, err = call(); err != nil {
			return err
		}
		ms = append(ms, float64(d.Microseconds())/1000)
	}
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	cpuSorted := slices.Clone(cpu)
	slices.Sort(cpuSorted)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"load_ms": float64(load.Microseconds()) / 1000, "warmup_ms": float64(warm.Microseconds()) / 1000,
		"ms": ms, "median_ms": sorted[len(sorted)/2], "min_ms": sorted[0],
		"cpu_ms": cpu, "min_cpu_ms": cpuSorted[0], "rel_l2_vs_torch": tensor.RelL2(out, ref["output"]),
		"vdpp_kernels": nn.DescribeKernels(b),
	})
}
