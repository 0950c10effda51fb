// Command wanmem measures the working memory of one Wan denoising step, one decode or one
// sample's image conditioning (an image-to-video folder's VAE encode of the condition
// video and image encoder) against model/wan's estimate (Sampler.Memory): it loads a Wan
// folder on the pure-Go backend, records VmRSS, runs the stage once and reports the peak
// VmHWM growth beside the estimate. Run one stage and shape per process (the high-water
// mark only grows):
//
//	go run ./scripts/wanmem -model ../shared/golden/wan-dev -stage step -width 512 -height 512 -frames 33
//	go run ./scripts/wanmem -model builtin/wan-i2v -stage condition -width 512 -height 512 -frames 33
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
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/tensor"
)

func main() {
	dir := flag.String("model", "", "Wan folder")
	stage := flag.String("stage", "step", "step, decode or condition")
	w := flag.Int("width", 256, "width")
	h := flag.Int("height", 256, "height")
	frames := flag.Int("frames", 17, "frames")
	guidance := flag.Float64("guidance", 5, "guidance_scale (> 1: two rows)")
	flag.Parse()
	if err := run(*dir, *stage, family.Params{Width: *w, Height: *h, NumFrames: *frames, Steps: 2, GuidanceScale: *guidance}); err != nil {
		fmt.Fprintln(os.Stderr, "wanmem:", err)
		os.Exit(1)
	}
}

func run(dir, stage string, p family.Params) error {
	roles := family.Roles{Denoise: true, Condition: true} // an image-to-video step's prepare encodes its image
	switch stage {
	case "decode":
		roles = family.Roles{Decode: true}
	case "condition":
		roles = family.Roles{Condition: true}
	}
	s, err := wan.Load(dir, family.Options{Backend: "go", Roles: roles})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Validate(p); err != nil {
		return err
	}
	est := s.Memory(p)
	r := rand.New(rand.NewPCG(1, 2))
	lat := s.LatentShape(p)
	var run func() error
	switch stage {
	case "step":
		sc, err := s.Scheduler(p)
		if err != nil {
			return err
		}
		c := s.RandomConditioning(r, lat)
		in := family.Input{PromptEmbeds: c[wan.KeyPromptEmbeds], NegativePromptEmbeds: c[wan.KeyNegativeEmbeds]}
		in.Image, in.LastImage = images(s, r, p)
		it, err := s.Prepare(context.Background(), in, p, sc, []int64{0})
		if err != nil {
			return err
		}
		st, err := s.Stepper(sc)
		if err != nil {
			return err
		}
		run = func() error { return st.Step(context.Background(), it) }
	case "decode":
		z := tensor.New(lat...)
		for i := range z.Data {
			z.Data[i] = float32(r.NormFloat64())
		}
		run = func() error { _, err := s.Decode(context.Background(), z, p); return err }
	case "condition":
		var in family.Input
		in.Image, in.LastImage = images(s, r, p)
		run = func() error {
			c, err := s.ImageConditioning(context.Background(), in, p)
			if err == nil && c == nil {
				err = fmt.Errorf("%s takes no image", dir)
			}
			return err
		}
	default:
		return fmt.Errorf("stage %q: step, decode or condition", stage)
	}
	runtime.GC()
	debug.FreeOSMemory()
	base := status("VmRSS")
	hwm0 := status("VmHWM")
	start := time.Now()
	if err := run(); err != nil {
		return err
	}
	out := map[string]any{"stage": stage, "width": p.Width, "height": p.Height, "frames": p.NumFrames, "latent": lat,
		"seconds": time.Since(start).Seconds(), "rss_before_mb": mb(base), "hwm_before_mb": mb(hwm0), "hwm_after_mb": mb(status("VmHWM")),
		"growth_mb": mb(status("VmHWM") - base), "estimate_step_mb": mb(est.Step), "estimate_decode_mb": mb(est.Decode)}
	out["estimate_encode_mb"] = mb(est.Encode)
	e := est.Step
	switch stage {
	case "decode":
		e = est.Decode
	case "condition":
		e = est.Encode
	}
	out["estimate_over_growth"] = float64(e) / float64(max(status("VmHWM")-base, 1))
	return json.NewEncoder(os.Stdout).Encode(out)
}

// images are the images a job of the folder gives: none for text-to-video, else the
// image and, where the folder takes one, the last image.
func images(s *wan.Sampler, r *rand.Rand, p family.Params) (img, last image.Image) {
	if s.Spec.Image == family.NeedNone {
		return nil, nil
	}
	img = noiseImage(r, p.Width, p.Height)
	if s.Spec.LastImage != family.NeedNone {
		last = noiseImage(r, p.Width, p.Height)
	}
	return img, last
}

// noiseImage is a w x h image of uniform noise.
func noiseImage(r *rand.Rand, w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.IntN(256))
	}
	return img
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
