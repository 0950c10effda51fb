// Command wanheld measures a Wan 2.1 T2V 1.3B-shaped transformer (30 layers, width 1536, 12
// heads, ffn 8960, text 4096) with random weights held in one weight type, on the pure-Go
// backend (-backend: with vdpp's CPU kernels by default; go:kernels=off holds weights as
// XLA does, bf16 as a GoMLX dtype and block types in float32): the resident memory once the weights are loaded (VmRSS after a GC, against the
// process's before), then the time of each denoising step (one transformer call on the
// two rows of classifier-free guidance; wall and process CPU seconds) and the peak resident
// memory (VmHWM). Run one type
// per process (the high-water mark only grows):
//
//	go run ./scripts/wanheld -dtype q8_0
//	go run ./scripts/wanheld -dtype bf16 -backend go:kernels=off -layers 8   # as XLA holds it
//	go run ./scripts/wanheld -dtype f32 -layers 4 -steps 2 -width 320 -height 192 -frames 9
//	go run ./scripts/wanheld -write DIR     # the same model as files (scripts/weights-vs-sdcpp.sh)
//
// The weights are the same for every type and process: each tensor is drawn from a
// generator seeded by its name (matrices N(0, 1/fan_in), norms 1, the rest N(0, 0.02²)),
// made one tensor at a time and converted to the type as it is loaded, so no float32 copy
// of the whole model exists unless the type is f32.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Wan21T2V13B is the transformer config of Wan-AI/Wan2.1-T2V-1.3B-Diffusers.
var Wan21T2V13B = transformer.Config{PatchSize: [3]int{1, 2, 2}, NumAttentionHeads: 12, AttentionHeadDim: 128,
	InChannels: 16, OutChannels: 16, TextDim: 4096, FreqDim: 256, FFNDim: 8960, NumLayers: 30, CrossAttnNorm: true,
	QKNorm: "rms_norm_across_heads", Eps: 1e-6, RopeMaxSeqLen: 1024}

func main() {
	dtype := flag.String("dtype", "q8_0", "weight type: "+strings.Join(quant.Flags(), ", "))
	layers := flag.Int("layers", 30, "transformer layers")
	w := flag.Int("width", 320, "video width")
	h := flag.Int("height", 192, "video height")
	frames := flag.Int("frames", 9, "video frames")
	steps := flag.Int("steps", 1, "denoising steps to time (0: load only)")
	textLen := flag.Int("text", 512, "prompt embedding rows")
	backend := flag.String("backend", "go", "the pure-Go backend's `SPEC` (go, go:kernels=off)")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the steps to this file")
	write := flag.String("write", "", "write the model's files for the comparison with stable-diffusion.cpp into this folder instead (see write.go)")
	flag.Parse()
	profileFile = *profile
	if *write != "" {
		if err := writeAll(*write, *layers); err != nil {
			fmt.Fprintln(os.Stderr, "wanheld:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*backend, *dtype, *layers, *w, *h, *frames, *steps, *textLen); err != nil {
		fmt.Fprintln(os.Stderr, "wanheld:", err)
		os.Exit(1)
	}
}

func run(spec, dtype string, layers, w, h, frames, steps, textLen int) error {
	typ, err := quant.Parse(dtype)
	if err != nil {
		return err
	}
	cfg := Wan21T2V13B
	cfg.NumLayers = layers
	exp, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		return err
	}
	b, err := nn.NewBackend(spec)
	if err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	rss0 := status("VmRSS")
	start := time.Now()
	var params int64
	weights, err := nn.NewWeightsHeld(b, nn.HoldAs(typ), func(add func(string, nn.StoredTensor) error) error {
		names := make([]string, 0, len(exp))
		for n := range exp {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			d := RandomTensor(n, exp[n])
			params += int64(len(d.Data))
			raw, err := quant.Quantize(quant.F32, d.Data)
			if err != nil {
				return err
			}
			if err := add(n, nn.StoredTensor{Shape: d.Shape, Type: quant.F32, Data: raw}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	m, err := transformer.NewFromWeights(cfg, weights)
	if err != nil {
		return err
	}
	defer m.Close()
	loadSec := time.Since(start).Seconds()
	runtime.GC()
	debug.FreeOSMemory()
	rss1 := status("VmRSS")
	held := map[string]int64{}
	for t, n := range weights.HeldBytes() {
		held[t.String()] = n
	}
	out := map[string]any{"backend": spec, "dtype": typ.String(), "layers": layers, "params": params, "held_bytes": held,
		"weights_bytes": weights.Bytes(), "f32_bytes": 4 * params, "held_over_f32": float64(weights.Bytes()) / float64(4*params),
		"rss_before_mb": mb(rss0), "rss_loaded_mb": mb(rss1), "rss_weights_mb": mb(rss1 - rss0), "load_seconds": loadSec}
	if steps > 0 {
		r := rand.New(rand.NewPCG(1, 2))
		lat := []int{2, cfg.InChannels, (frames-1)/4 + 1, h / 8, w / 8}
		hidden := randDense(r, 1, lat...)
		ehs := randDense(r, 1, 2, textLen, cfg.TextDim)
		var secs, cpu []float64
		if profileFile != "" {
			f, err := os.Create(profileFile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		for s := range steps {
			ts := &tensor.Dense{Shape: []int{2}, Data: []float32{float32(999 - 500*s), float32(999 - 500*s)}}
			t0, c0 := time.Now(), cpuSeconds()
			if _, err := m.Forward(hidden, ts, ehs, nil); err != nil {
				return err
			}
			secs, cpu = append(secs, time.Since(t0).Seconds()), append(cpu, cpuSeconds()-c0)
		}
		out["latent"], out["step_seconds"], out["step_cpu_seconds"], out["hwm_mb"] = lat, secs, cpu, mb(status("VmHWM"))
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

var profileFile string

// RandomTensor returns the random weights of tensor name: the same for every process.
func RandomTensor(name string, shape []int) *tensor.Dense {
	f := fnv.New64a()
	f.Write([]byte(name))
	r := rand.New(rand.NewPCG(f.Sum64(), 11))
	d := tensor.New(shape...)
	std := 0.02
	switch {
	case strings.Contains(name, "norm") && len(shape) == 1:
		for i := range d.Data {
			d.Data[i] = 1
		}
		return d
	case strings.HasSuffix(name, ".weight") && len(shape) >= 2:
		std = 1 / math.Sqrt(float64(tensor.NumElements(shape[1:])))
	}
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64() * std)
	}
	return d
}

func randDense(r *rand.Rand, std float64, shape ...int) *tensor.Dense {
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64() * std)
	}
	return d
}

// cpuSeconds is the process's CPU time so far (user and system, every thread): under a
// shared machine's load it varies less than the wall time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// status reads a kB field of /proc/self/status, in bytes.
func status(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == field {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}
