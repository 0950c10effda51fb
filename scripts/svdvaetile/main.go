// Command svdvaetile measures SVD's VAE tiling (model/svd/vae, --vae-tile): each run is one
// process, so its peak resident memory (VmHWM) is its own.
//
//	svdvaetile -op encode -model M -images DIR -frames 7 -height 256 -width 256 -out z.safetensors
//	svdvaetile -op decode -model M -latents z.safetensors -tile 0  -out full.safetensors
//	svdvaetile -op decode -model M -latents z.safetensors -tile 64 -out tiled.safetensors
//	svdvaetile -op compare -a full.safetensors -b tiled.safetensors
//
// encode makes real latents: the first -frames PNGs of DIR, repeated to fill the frame
// (the images are smaller than the frame), encoded untiled (the posterior's mean). decode
// decodes them in one chunk (all frames: the temporal decoder sees them together), tiled
// in -tile pixels or not. compare prints the max abs difference and the PSNR of b against
// a (frames mapped to [0, 1]). Each prints one JSON line.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

func main() {
	op := flag.String("op", "decode", "encode, decode or compare")
	model := flag.String("model", "builtin", `SVD folder, or "builtin"`)
	images := flag.String("images", "", "folder of PNG frames (encode)")
	frames := flag.Int("frames", 7, "frames (encode)")
	height := flag.Int("height", 256, "frame height (encode)")
	width := flag.Int("width", 256, "frame width (encode)")
	latents := flag.String("latents", "", "latents file (decode)")
	tile := flag.Int("tile", 0, "tile side in pixels (decode; 0: untiled)")
	out := flag.String("out", "", "output file (encode, decode)")
	a := flag.String("a", "", "reference frames (compare)")
	b := flag.String("b", "", "frames to compare (compare)")
	flag.Parse()
	var res map[string]any
	var err error
	switch *op {
	case "encode":
		res, err = encode(*model, *images, *frames, *height, *width, *out)
	case "decode":
		res, err = decode(*model, *latents, *tile, *out)
	case "compare":
		res, err = compare(*a, *b)
	default:
		err = fmt.Errorf("unknown -op %q", *op)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "svdvaetile:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

func load(model string, enc, dec bool) (*vae.Model, error) {
	if model == builtin.Name {
		d, err := builtin.Dir()
		if err != nil {
			return nil, err
		}
		model = d
	}
	ck, err := checkpoint.Open(model)
	if err != nil {
		return nil, err
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		return nil, err
	}
	return vae.LoadParts(ck, "", b, enc, dec)
}

func encode(model, dir string, n, h, w int, out string) (map[string]any, error) {
	m, err := load(model, true, false)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	sort.Strings(paths)
	if len(paths) < n {
		return nil, fmt.Errorf("%s has %d PNG frames, want %d", dir, len(paths), n)
	}
	x := tensor.New(n, 3, h, w)
	for f := 0; f < n; f++ {
		img, err := video.LoadImage(paths[f])
		if err != nil {
			return nil, err
		}
		fill(x, f, img)
	}
	z := tensor.New(n, m.Config().LatentChannels, h/m.Factor(), w/m.Factor())
	per := z.Len() / n
	for f := 0; f < n; f++ { // one frame at a time: the encoder is per image
		p, err := m.Encode(x.Rows(f, f+1).Clone())
		if err != nil {
			return nil, err
		}
		copy(z.Data[f*per:], p.Mean.Data)
	}
	if err := safetensors.WriteFile(out, []safetensors.NamedTensor{{Name: "latents", Tensor: z}, {Name: "frames", Tensor: x}}, nil); err != nil {
		return nil, err
	}
	return map[string]any{"op": "encode", "latents": z.Shape}, nil
}

// fill writes img into frame f of x [F, 3, H, W] in [-1, 1], repeated to fill the frame.
func fill(x *tensor.Dense, f int, img image.Image) {
	h, w := x.Shape[2], x.Shape[3]
	b := img.Bounds()
	for y := 0; y < h; y++ {
		for xx := 0; xx < w; xx++ {
			r, g, bb, _ := img.At(b.Min.X+xx%b.Dx(), b.Min.Y+y%b.Dy()).RGBA()
			for c, v := range []uint32{r, g, bb} {
				x.Data[((f*3+c)*h+y)*w+xx] = float32(v>>8)/127.5 - 1
			}
		}
	}
}

func decode(model, latents string, tile int, out string) (map[string]any, error) {
	m, err := load(model, false, true)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if m, err = m.WithTiling(vae.Tiling{Sample: tile, Overlap: vae.DefaultTileOverlap}); err != nil {
		return nil, err
	}
	f, err := safetensors.Open(latents)
	if err != nil {
		return nil, err
	}
	z, err := f.Tensor("latents")
	if err != nil {
		return nil, err
	}
	z = z.Clone()
	f.Close()
	runtime.GC()
	before, err := peakRSS()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	x, err := m.Decode(z, 0)
	if err != nil {
		return nil, err
	}
	secs := time.Since(t0).Seconds()
	peak, err := peakRSS()
	if err != nil {
		return nil, err
	}
	if err := safetensors.WriteFile(out, []safetensors.NamedTensor{{Name: "frames", Tensor: x}}, nil); err != nil {
		return nil, err
	}
	return map[string]any{"op": "decode", "tile": tile, "frames": x.Shape, "peak_rss_mb": peak >> 20,
		"rss_before_mb": before >> 20, "seconds": secs}, nil
}

func compare(a, b string) (map[string]any, error) {
	read := func(p string) (*tensor.Dense, error) {
		f, err := safetensors.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		t, err := f.Tensor("frames")
		if err != nil {
			return nil, err
		}
		return t.Clone(), nil
	}
	x, err := read(a)
	if err != nil {
		return nil, err
	}
	y, err := read(b)
	if err != nil {
		return nil, err
	}
	if !tensor.SameShape(x, y) {
		return nil, fmt.Errorf("%v and %v", x.Shape, y.Shape)
	}
	unit := func(v float32) float64 { return math.Min(math.Max(float64(v)/2+0.5, 0), 1) }
	var maxAbs, se float64
	for i := range x.Data {
		d := unit(x.Data[i]) - unit(y.Data[i])
		maxAbs = math.Max(maxAbs, math.Abs(d))
		se += d * d
	}
	mse := se / float64(len(x.Data))
	return map[string]any{"op": "compare", "a": a, "b": b, "max_abs_unit": maxAbs, "psnr_db": 10 * math.Log10(1/mse)}, nil
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
