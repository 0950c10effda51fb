// Command cpuvstorch is vdpp's side of scripts/cpu-vs-torch.sh: it loads one network from a
// folder the script wrote (config.json, diffusion_pytorch_model.safetensors,
// inputs.safetensors, torch_output.safetensors), makes one untimed call (which compiles),
// prints one JSON line with the output's relative L2 to PyTorch's, then reads commands
// from stdin: "run N" makes N calls and prints one JSON line with each call's wall and
// process CPU milliseconds (user + system over all threads); "quit" (or end of input)
// exits. The script alternates these rounds with PyTorch's, so both sides see the same
// machine load.
//
//	go run ./scripts/cpuvstorch -case svd-unet|svd-vae-decode|wan-transformer|wan-vae-decode -dir DIR [-chunk N] [-cpuprofile FILE]
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	svdvae "github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/model/wan/transformer"
	wanvae "github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func main() {
	kind := flag.String("case", "", "svd-unet, svd-vae-decode, wan-transformer or wan-vae-decode")
	dir := flag.String("dir", "", "folder written by the script")
	chunk := flag.Int("chunk", 0, "svd-vae-decode: frames decoded together (0: all)")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the timed calls to this file")
	flag.Parse()
	if *prof != "" {
		f, err := os.Create(*prof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpuvstorch:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := run(*kind, *dir, *chunk, os.Stdin, os.Stdout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "cpuvstorch:", err)
		os.Exit(1)
	}
}

// readAll reads every tensor of a safetensors file.
func readAll(path string) (map[string]*tensor.Dense, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*tensor.Dense{}
	for _, n := range f.Names() {
		if out[n], err = f.Tensor(n); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, n, err)
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

// load builds the network of kind from dir on b and returns one call of it on the inputs.
func load(b backends.Backend, kind, dir string, chunk int) (call func() (*tensor.Dense, error), closer func() error, err error) {
	in, err := readAll(filepath.Join(dir, "inputs.safetensors"))
	if err != nil {
		return nil, nil, err
	}
	weights := func() (map[string]*tensor.Dense, []byte, error) {
		w, err := readAll(filepath.Join(dir, "diffusion_pytorch_model.safetensors"))
		if err != nil {
			return nil, nil, err
		}
		cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
		return w, cfg, err
	}
	switch kind {
	case "svd-unet":
		w, raw, err := weights()
		if err != nil {
			return nil, nil, err
		}
		cfg, err := unet.ParseConfig("config.json", raw)
		if err != nil {
			return nil, nil, err
		}
		m, err := unet.New(cfg, w, b)
		if err != nil {
			return nil, nil, err
		}
		return func() (*tensor.Dense, error) {
			return m.Forward(in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
		}, m.Close, nil
	case "svd-vae-decode":
		w, raw, err := weights()
		if err != nil {
			return nil, nil, err
		}
		cfg, err := svdvae.ParseConfig("config.json", raw)
		if err != nil {
			return nil, nil, err
		}
		m, err := svdvae.New(cfg, w, b)
		if err != nil {
			return nil, nil, err
		}
		return func() (*tensor.Dense, error) { return m.Decode(in["latents"], chunk) }, m.Close, nil
	case "wan-transformer":
		m, err := transformer.Load(dir, "", b)
		if err != nil {
			return nil, nil, err
		}
		return func() (*tensor.Dense, error) {
			return m.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
		}, m.Close, nil
	case "wan-vae-decode":
		v, err := wanvae.Load(dir, "", b)
		if err != nil {
			return nil, nil, err
		}
		return func() (*tensor.Dense, error) { return v.Decode(in["latents"]) }, v.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown case %q", kind)
}

func run(kind, dir string, chunk int, stdin io.Reader, stdout io.Writer) error {
	b, err := nn.NewBackend("go")
	if err != nil {
		return err
	}
	call, closer, err := load(b, kind, dir, chunk)
	if err != nil {
		return err
	}
	defer closer()
	ref, err := readAll(filepath.Join(dir, "torch_output.safetensors"))
	if err != nil {
		return err
	}
	t0 := time.Now()
	out, err := call()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	want := ref["output"]
	if want == nil || !tensor.SameShape(out, want) {
		return fmt.Errorf("output %v, PyTorch's %v", out.Shape, want)
	}
	if err := enc.Encode(map[string]any{"ready": true, "first_call_ms": time.Since(t0).Seconds() * 1000,
		"rel_l2_vs_torch": tensor.RelL2(out, want), "kernels": nn.DescribeKernels(b)}); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "quit" {
			return nil
		}
		n, err := strconv.Atoi(f[len(f)-1])
		if f[0] != "run" || len(f) != 2 || err != nil || n < 1 {
			return fmt.Errorf("bad command %q (want \"run N\" or \"quit\")", sc.Text())
		}
		var ms, cpu []float64
		for range n {
			c0, s := cpuTime(), time.Now()
			if _, err := call(); err != nil {
				return err
			}
			ms = append(ms, time.Since(s).Seconds()*1000)
			cpu = append(cpu, (cpuTime()-c0).Seconds()*1000)
		}
		if err := enc.Encode(map[string]any{"ms": ms, "cpu_ms": cpu}); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
