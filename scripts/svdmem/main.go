// Command svdmem measures the working memory of one SVD denoising step, one decode or one
// sample's conditioning (the image encoder and the VAE encode of the image) beside the
// SVD family's estimates (StepActivationBytes, ConditionActivationBytes,
// DecodeActivationBytes): it loads an SVD
// folder on the pure-Go backend, records VmRSS, runs the stage once and reports the peak
// VmHWM growth. Run one stage and shape per process (the high-water mark only grows):
//
//	go run ./scripts/svdmem -model builtin/model -stage condition -width 512 -height 512 -frames 2
//	go run ./scripts/svdmem -model builtin/model -stage decode -width 256 -height 256 -frames 14 -decode-chunk 7
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

func main() {
	dir := flag.String("model", "builtin/model", "SVD folder")
	stage := flag.String("stage", "step", "step, decode or condition")
	w := flag.Int("width", 256, "width")
	h := flag.Int("height", 256, "height")
	frames := flag.Int("frames", 14, "frames")
	chunk := flag.Int("decode-chunk", -1, "frames per decode call (0: all; -1: the folder's default)")
	tile := flag.Int("vae-tile", 0, "VAE tile side in pixels (0: untiled)")
	flag.Parse()
	if err := run(*dir, *stage, *w, *h, *frames, *chunk, *tile); err != nil {
		fmt.Fprintln(os.Stderr, "svdmem:", err)
		os.Exit(1)
	}
}

func run(dir, stage string, w, h, frames, chunk, tile int) error {
	roles := family.Roles{Condition: true, Denoise: true}
	if stage == "decode" {
		roles = family.Roles{Decode: true}
	}
	fs, err := family.Open(dir, family.Options{Backend: "go", Roles: roles})
	if err != nil {
		return err
	}
	defer fs.Close()
	s, ok := fs.(*svd.Sampler)
	if !ok {
		return fmt.Errorf("%s is not an SVD folder", dir)
	}
	p := s.DefaultParams()
	p.Width, p.Height, p.NumFrames, p.Steps = w, h, frames, 2
	if chunk >= 0 {
		p.DecodeChunkSize = chunk
	}
	p.VAETile = tile
	if err := s.Validate(p); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.IntN(256))
	}
	sc, err := s.Scheduler(p)
	if err != nil {
		return err
	}
	prepare := func() (*pipeline.Item, error) {
		return s.Prepare(context.Background(), family.Input{Image: img}, p, sc, []int64{0})
	}
	var run func() error
	switch stage {
	case "step":
		it, err := prepare()
		if err != nil {
			return err
		}
		st, err := s.Stepper(sc)
		if err != nil {
			return err
		}
		run = func() error { return st.Step(context.Background(), it) }
	case "condition":
		run = func() error { _, err := prepare(); return err }
	case "decode":
		z := tensor.New(s.LatentShape(p)...)
		for i := range z.Data {
			z.Data[i] = float32(r.NormFloat64())
		}
		run = func() error { _, err := s.Decode(context.Background(), z, p); return err }
	default:
		return fmt.Errorf("stage %q: step, decode or condition", stage)
	}
	runtime.GC()
	debug.FreeOSMemory()
	base := status("VmRSS")
	start := time.Now()
	if err := run(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"stage": stage, "width": w, "height": h, "frames": frames,
		"decode_chunk": p.DecodeChunkSize, "seconds": time.Since(start).Seconds(), "growth_mb": mb(status("VmHWM") - base),
		"estimate_step_mb": mb(s.StepActivationBytes(p)), "estimate_condition_mb": mb(s.ConditionActivationBytes(p)),
		"estimate_decode_mb": mb(s.DecodeActivationBytes(p))})
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
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}
