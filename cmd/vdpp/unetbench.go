package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/unetbench"
	"github.com/vdpp/vdpp/model/svd/unetcost"
	"github.com/vdpp/vdpp/tensor"
)

// runUNetBench times SVD UNet calls with random weights (bench/unetbench).
func runUNetBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := unetbench.DefaultOptions()
	fs := newFlags("unetbench", stdout, stderr)
	fs.StringVar(&o.Config, "config", o.Config, `UNet config: "xt" (SVD-XT) or a unet/config.json path`)
	fs.IntVar(&o.Frames, "num-frames", o.Frames, "frames T")
	fs.Alias("frames", "num-frames")
	fs.IntVar(&o.Height, "height", o.Height, "height in pixels (latent = height/8)")
	fs.IntVar(&o.Width, "width", o.Width, "width in pixels (latent = width/8)")
	fs.IntVar(&o.Batch, "batch", o.Batch, "videos per call (2 = one classifier-free-guided call)")
	fs.StringVar(&o.DType, "dtype", o.DType, "compute dtype: f32, bf16 or f16")
	fs.StringVar(&o.Backend, "backend", o.Backend, "go, xla:cuda, xla:/path/plugin.so (default: automatic)")
	fs.IntVar(&o.Warmup, "warmup", o.Warmup, "untimed calls first (the first compiles)")
	fs.IntVar(&o.Iters, "iters", o.Iters, "timed calls")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the random weights and inputs")
	jsonPath := fs.String("json", "", "also write the result as JSON to this file")
	countOnly := fs.Bool("count-only", false, "print the FLOP and parameter count of one call as JSON, run nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *countOnly {
		return writeUNetCount(stdout, o)
	}
	r := unetbench.Runner{Expected: unet.ExpectedTensors, New: newBenchUNet, CheckDType: unetDType}
	res, err := r.Run(ctx, o)
	if err != nil {
		return err
	}
	if *jsonPath != "" {
		raw, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonPath, append(raw, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *jsonPath, err)
		}
	}
	_, err = fmt.Fprintf(stdout, "unet %s %s %s batch %d, %d frames, %dx%d: median %.2f ms (min %.2f, first call %.1f s), %s a call, %s/s\n",
		res.Config, res.Backend, res.DType, res.Batch, res.Frames, res.Height, res.Width, res.MedianMS, res.MinMS, res.FirstCallS,
		flopsString(res.FLOPs), flopsString(res.TFLOPS*1e12))
	return err
}

// flopsString prints a FLOP count in TFLOP, or in GFLOP below one TFLOP (the small
// configs' calls are a fraction of a GFLOP, which "0.0 TFLOP" hides).
func flopsString(f float64) string {
	if f >= 1e12 {
		return fmt.Sprintf("%.1f TFLOP", f/1e12)
	}
	return fmt.Sprintf("%.2f GFLOP", f/1e9)
}

// writeUNetCount prints unetcost's count for o's config and shape as JSON.
func writeUNetCount(w io.Writer, o unetbench.Options) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg, err := unetbench.LoadConfig(o.Config, os.ReadFile)
	if err != nil {
		return err
	}
	c, err := unetcost.Count(cfg, unetcost.Shape{Batch: o.Batch, Frames: o.Frames, Height: o.Height / 8, Width: o.Width / 8})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"config": o.Config, "batch": o.Batch, "frames": o.Frames, "height": o.Height, "width": o.Width,
		"flops": c.Total, "conv_flops": c.Conv, "linear_flops": c.Linear, "spatial_attention_flops": c.SpatialAttention,
		"temporal_attention_flops": c.TemporalAttention, "params": c.Params, "tensors": c.Tensors})
}

// benchUNet is a UNet with the backend it owns.
type benchUNet struct {
	*unet.Model
	backend backends.Backend
}

func (b benchUNet) Close() error {
	err := b.Model.Close()
	b.backend.Finalize()
	return err
}

// unetDType refuses what model/svd/unet cannot compute in: it runs float32 only, and a
// bf16 request is refused rather than silently run in float32.
func unetDType(dtype string) error {
	if dtype != "f32" {
		return fmt.Errorf("dtype %s: model/svd/unet computes in float32 only (run with --dtype f32)", dtype)
	}
	return nil
}

// newBenchUNet builds the UNet on a new backend.
func newBenchUNet(cfg unet.Config, w map[string]*tensor.Dense, backend, dtype string) (unetbench.Forwarder, error) {
	if err := unetDType(dtype); err != nil {
		return nil, err
	}
	b, err := nn.NewBackend(backend)
	if err != nil {
		return nil, err
	}
	m, err := unet.New(cfg, w, b)
	if err != nil {
		b.Finalize()
		return nil, err
	}
	return benchUNet{Model: m, backend: b}, nil
}
