// Command wanbench times vdpp's Wan transformer on a folder written by
// scripts/wanref/transformer_speed.py (config.json, weights, inputs.safetensors and the
// PyTorch output torch_output.safetensors) and prints one JSON line: every call's
// milliseconds, their median, and the output's relative L2 to PyTorch's.
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
	call := func() (*tensor.Dense, time.Duration, error) {
		s := time.Now()
		out, err := m.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
		return out, time.Since(s), err
	}
	_, warm, err := call()
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
	gemm, _ := nn.SimpleGoGEMM()
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"load_ms": float64(load.Microseconds()) / 1000, "warmup_ms": float64(warm.Microseconds()) / 1000,
		"ms": ms, "median_ms": sorted[len(sorted)/2], "rel_l2_vs_torch": tensor.RelL2(out, ref["output"]),
		"vdpp_gemm": gemm,
	})
}
