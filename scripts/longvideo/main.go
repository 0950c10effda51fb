// Command longvideo measures long videos on the built-in model against the procedural
// dataset's known future: for held-out clips rendered at --frames frames it generates from
// each clip's first frame with temporal windows (`vdpp generate --window --overlap
// --blend`), then prints, as JSON lines, PSNR by horizon against the ground truth (and for
// the repeat-the-first-frame baseline) and the seam measure: the mean absolute
// frame-to-frame change across window edges divided by the same within windows.
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
	out := flag.String("out", "out/longvideo", "work folder")
	flag.Parse()
	if err := run(*frames, *clips, *steps, *window, *overlap, *blend, *name, *out); err != nil {
		fmt.Fprintln(os.Stderr, "longvideo:", err)
		os.Exit(1)
	}
}

// horizons are the frame ranges PSNR is averaged over (frame 0 is the given image).
var horizons = [][2]int{{1, 14}, {14, 28}, {28, 56}, {56, 112}, {112, 224}}

func run(frames, clips, steps, window, overlap int, blend, name, out string) error {
	c := procedural.DefaultConfig()
	c.Frames = frames
	w := pipeline.Windows{Size: window, Overlap: overlap, Blend: blend}
	starts, err := w.Starts(frames)
	if err != nil {
		return err
	}
	edge := map[int]bool{} // transitions f-1 -> f at a window's first or past its last frame
	for _, a := range starts[1:] {
		edge[a] = true
	}
	for _, a := range starts[:len(starts)-1] {
		edge[a+window] = true
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
		o := generate.DefaultOptions()
		o.Model, o.Image, o.Out, o.Steps, o.NumFrames = builtin.Name, img, dir, steps, frames
		o.Window, o.Overlap, o.Blend = window, overlap, blend
		if o, err = generate.Resolve(o); err != nil {
			return err
		}
		if err := generate.RunRank(context.Background(), o, comm.SingleProcess(), slog.New(slog.DiscardHandler)); err != nil {
			return err
		}
		gen := make([][]float32, frames)
		for f := range gen {
			if gen[f], err = readUnit(filepath.Join(dir, "sample-000", "frames", fmt.Sprintf("%03d.png", f))); err != nil {
				return err
			}
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
