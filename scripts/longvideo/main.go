// Command longvideo measures long videos on the built-in model against the procedural
// dataset's known future: for held-out clips rendered at --frames frames it generates from
// each clip's first frame, then prints, as JSON lines, PSNR by horizon against the ground
// truth (and for the repeat-the-first-frame baseline) and the seam measure: the mean
// absolute frame-to-frame change across window edges divided by the same within windows.
//
// --method windows (the engine's): overlapping temporal windows denoised together and
// blended at every step (`vdpp generate --window --overlap --blend`). --method continue:
// windows continued from the previous window's last frame, each an ordinary image-to-video
// generation of --window frames from the previous window's last generated frame (as a PNG,
// as a user chaining runs would), its first frame (the conditioning image again) dropped.
// scripts/long-video.sh runs it; docs/long-video.md has the numbers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"math"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/eval"
	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/pipeline"
)

type result struct {
	Config    string    `json:"config"`
	Frames    int       `json:"frames"`
	Clips     int       `json:"clips"`
	Horizons  []string  `json:"horizons"`
	PSNR      []float64 `json:"psnr_db"`
	RepeatPSN []float64 `json:"repeat_first_psnr_db"`
	EdgeMAD   float64   `json:"edge_mad"`
	InnerMAD  float64   `json:"inner_mad"`
	SeamRatio float64   `json:"seam_ratio"`
}

func main() {
	frames := flag.Int("frames", 56, "frames per clip")
	clips := flag.Int("clips", 3, "held-out clips")
	steps := flag.Int("steps", 10, "denoising steps")
	window := flag.Int("window", 14, "window")
	overlap := flag.Int("overlap", 3, "overlap")
	blend := flag.String("blend", "cosine", "linear or cosine")
	name := flag.String("name", "", "config name in the output")
	method := flag.String("method", "windows", "windows (blended in latent space) or continue (from the previous window's last frame)")
	out := flag.String("out", "out/longvideo", "work folder")
	flag.Parse()
	if err := run(*method, *frames, *clips, *steps, *window, *overlap, *blend, *name, *out); err != nil {
		fmt.Fprintln(os.Stderr, "longvideo:", err)
		os.Exit(1)
	}
}

// horizons are the frame ranges PSNR is averaged over (frame 0 is the given image).
var horizons = [][2]int{{1, 14}, {14, 28}, {28, 56}, {56, 112}, {112, 224}}

func run(method string, frames, clips, steps, window, overlap int, blend, name, out string) error {
	c := procedural.DefaultConfig()
	c.Frames = frames
	edge := map[int]bool{} // transitions f-1 -> f at a window's first or past its last frame
	switch method {
	case "windows":
		w := pipeline.Windows{Size: window, Overlap: overlap, Blend: blend}
		starts, err := w.Starts(frames)
		if err != nil {
			return err
		}
		for _, a := range starts[1:] {
			edge[a] = true
		}
		for _, a := range starts[:len(starts)-1] {
			edge[a+window] = true
		}
	case "continue":
		// Window k covers frames k(W-1) .. k(W-1)+W-1; its frame 0 is the previous
		// window's last, so the cut is between k(W-1) and k(W-1)+1.
		for a := window - 1; a+1 < frames; a += window - 1 {
			edge[a+1] = true
		}
	default:
		return fmt.Errorf("--method %q (want windows or continue)", method)
	}
	res := result{Config: name, Frames: frames, Clips: clips}
	var sums, reps []float64
	var counts []int
	var edgeSum, innerSum float64
	var edgeN, innerN int
	for i := 0; i < clips; i++ {
		truth := procedural.Video(c, 1, procedural.HeldOut, i)
		dir := filepath.Join(out, fmt.Sprintf("%s-clip%d", name, i))
		img := filepath.Join(dir, "first.png")
		if err := writePNG(img, truth[0]); err != nil {
			return err
		}
		var gen [][]float32
		var err error
		if method == "windows" {
			gen, err = generateWindows(img, dir, steps, frames, window, overlap, blend)
		} else {
			gen, err = generateContinued(img, dir, steps, frames, window)
		}
		if err != nil {
			return err
		}
		first := unit(truth[0])
		for hi, h := range horizons {
			if hi >= len(sums) {
				sums, reps, counts = append(sums, 0), append(reps, 0), append(counts, 0)
			}
			for f := h[0]; f < min(h[1], frames); f++ {
				gt := unit(truth[f])
				p, err := eval.PSNR(gen[f], gt)
				if err != nil {
					return err
				}
				r, _ := eval.PSNR(first, gt)
				sums[hi] += p
				reps[hi] += r
				counts[hi]++
			}
		}
		for f := 1; f < frames; f++ {
			d := mad(gen[f-1], gen[f])
			if edge[f] {
				edgeSum, edgeN = edgeSum+d, edgeN+1
			} else {
				innerSum, innerN = innerSum+d, innerN+1
			}
		}
	}
	for hi, h := range horizons {
		if counts[hi] == 0 {
			continue
		}
		res.Horizons = append(res.Horizons, fmt.Sprintf("%d..%d", h[0], min(h[1], frames)-1))
		res.PSNR = append(res.PSNR, round(sums[hi]/float64(counts[hi])))
		res.RepeatPSN = append(res.RepeatPSN, round(reps[hi]/float64(counts[hi])))
	}
	if edgeN > 0 && innerN > 0 {
		res.EdgeMAD, res.InnerMAD = edgeSum/float64(edgeN), innerSum/float64(innerN)
		res.SeamRatio = round(res.EdgeMAD / res.InnerMAD)
		res.EdgeMAD, res.InnerMAD = math.Round(res.EdgeMAD*1e4)/1e4, math.Round(res.InnerMAD*1e4)/1e4
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// generateOnce runs `vdpp generate` on the built-in model from img into dir and returns the
// frames of sample 0 in [0, 1]; window 0 runs the model's native length as one window.
func generateOnce(img, dir string, seed int64, steps, frames, window, overlap int, blend string) ([][]float32, error) {
	o := generate.DefaultOptions()
	o.Model, o.Image, o.Out, o.Steps, o.NumFrames, o.Seed = builtin.Name, img, dir, steps, frames, seed
	o.Window, o.Overlap, o.Blend = window, overlap, blend
	o, err := generate.Resolve(o)
	if err != nil {
		return nil, err
	}
	if err := generate.RunRank(context.Background(), o, comm.SingleProcess(), slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	gen := make([][]float32, frames)
	for f := range gen {
		if gen[f], err = readUnit(filepath.Join(dir, "sample-000", "frames", fmt.Sprintf("%03d.png", f))); err != nil {
			return nil, err
		}
	}
	return gen, nil
}

// generateWindows is the engine's method: one run of frames frames in blended windows.
func generateWindows(img, dir string, steps, frames, window, overlap int, blend string) ([][]float32, error) {
	return generateOnce(img, dir, 0, steps, frames, window, overlap, blend)
}

// generateContinued chains image-to-video runs of window frames, each from the previous
// run's last frame, and keeps each later run's frames 1.. (its frame 0 re-renders the
// conditioning image).
func generateContinued(img, dir string, steps, frames, window int) ([][]float32, error) {
	var out [][]float32
	for k := 0; len(out) < frames; k++ {
		sub := filepath.Join(dir, fmt.Sprintf("window-%02d", k))
		gen, err := generateOnce(img, sub, int64(k), steps, window, 0, -1, "")
		if err != nil {
			return nil, err
		}
		if k > 0 {
			gen = gen[1:]
		}
		out = append(out, gen...)
		img = filepath.Join(sub, "sample-000", "frames", fmt.Sprintf("%03d.png", window-1))
	}
	return out[:frames], nil
}

func round(v float64) float64 { return math.Round(v*100) / 100 }

func mad(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += math.Abs(float64(a[i] - b[i]))
	}
	return s / float64(len(a))
}

// unit returns img's RGB values in [0, 1], channel-major.
func unit(img image.Image) []float32 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]float32, 3*w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
			for c, v := range []uint32{r, g, bl} {
				out[(c*h+y)*w+x] = float32(v>>8) / 255
			}
		}
	}
	return out
}

func readUnit(path string) ([]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return unit(img), nil
}

func writePNG(path string, img image.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, img)
}
