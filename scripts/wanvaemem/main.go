// Command wanvaemem measures the peak resident memory (VmHWM) of one Wan VAE encode or
// streamed decode, untiled or tiled, in its own process, and prints one JSON line. It is
// run by scripts/wan-vae-memory.sh, which compares the settings.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/tensor"
)

func main() {
	dir := flag.String("vae", "model/wan/vae/testdata/tiled", "AutoencoderKLWan folder (config.json + weights)")
	op := flag.String("op", "decode", "encode or decode")
	tiled := flag.Bool("tiled", false, "tile the frames (diffusers' enable_tiling; -tile, -stride)")
	height := flag.Int("height", 384, "frame height in pixels")
	width := flag.Int("width", 384, "frame width in pixels")
	latentFrames := flag.Int("latent-frames", 3, "latent frames (video frames = 1 + T·(n−1))")
	tile := flag.Int("tile", 256, "tile size in pixels with -tiled")
	stride := flag.Int("stride", 192, "tile stride in pixels with -tiled")
	flag.Parse()
	tiling := (*vae.Tiling)(nil)
	if *tiled {
		tiling = &vae.Tiling{MinHeight: *tile, MinWidth: *tile, StrideHeight: *stride, StrideWidth: *stride}
	}
	if err := run(*dir, *op, tiling, *height, *width, *latentFrames); err != nil {
		fmt.Fprintln(os.Stderr, "wanvaemem:", err)
		os.Exit(1)
	}
}

func run(dir, op string, tiling *vae.Tiling, height, width, latentFrames int) error {
	b, err := nn.NewBackend("go")
	if err != nil {
		return err
	}
	v, err := vae.Load(dir, "", b)
	if err != nil {
		return err
	}
	defer v.Close()
	if tiling != nil {
		if v, err = v.WithOptions(vae.Options{Tiling: tiling}); err != nil {
			return err
		}
	}
	cfg := v.Config()
	s := cfg.SpatialFactor()
	base, err := peakRSS()
	if err != nil {
		return err
	}
	start := time.Now()
	frames := cfg.VideoFrames(latentFrames)
	switch op {
	case "encode":
		video := fill(tensor.New(1, 3, frames, height, width))
		if _, err := v.Encode(video); err != nil {
			return err
		}
	case "decode":
		z := fill(tensor.New(1, cfg.ZDim, latentFrames, height/s, width/s))
		err := v.DecodeStream(z, func(*tensor.Dense) error { return nil }) // frames dropped: a writer would encode them
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown op %q", op)
	}
	peak, err := peakRSS()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"op": op, "tiling": fmt.Sprint(tiling), "height": height, "width": width, "video_frames": frames,
		"peak_rss_mb": peak >> 20, "rss_before_mb": base >> 20, "seconds": time.Since(start).Seconds(),
	})
}

// fill sets t to a deterministic pattern in [-1, 1].
func fill(t *tensor.Dense) *tensor.Dense {
	for i := range t.Data {
		t.Data[i] = float32(i%37-18) / 18
	}
	return t
}

// peakRSS reads VmHWM (peak resident set size) from /proc/self/status, in bytes.
func peakRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}
