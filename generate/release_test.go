package generate

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
)

// generateWan runs a one-process built-in Wan generation of n samples (one per item) and
// returns the pixels of each sample's frames and the log.
func generateWan(t *testing.T, n int) ([][][]byte, string) {
	t.Helper()
	o := DefaultOptions()
	o.Model, o.Prompt, o.Out, o.Steps, o.NumSamples = builtin.WanName, "a red fox", filepath.Join(t.TempDir(), "out"), 2, n
	o.NumFrames, o.Height, o.Width = 5, 32, 48 // small: the test is about which weights are held, not quality
	var err error
	if o, err = Resolve(o); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := RunRank(context.Background(), o, comm.SingleProcess(), slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	var out [][][]byte
	for s := range n {
		paths, _ := filepath.Glob(filepath.Join(o.Out, fmt.Sprintf("sample-%03d", s), "frames", "*.png"))
		var frames [][]byte
		for _, p := range paths {
			// The pixels: the files also carry the job's parameters, which differ.
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			rgba := image.NewRGBA(img.Bounds())
			draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
			frames = append(frames, rgba.Pix)
		}
		if len(frames) != o.NumFrames {
			t.Fatalf("sample %d: %d frames, want %d", s, len(frames), o.NumFrames)
		}
		out = append(out, frames)
	}
	return out, log.String()
}

// The denoiser is released once, before the last item's decode and after every step: a run
// of one sample (released before its decode) writes the frames bit for bit of the same
// sample in a run of two (decoded with the denoiser held, the release coming before the
// second sample's decode, after its steps).
func TestReleaseDenoiserBeforeLastDecode(t *testing.T) {
	one, log1 := generateWan(t, 1)
	two, log2 := generateWan(t, 2)
	for name, log := range map[string]string{"one sample": log1, "two samples": log2} {
		if n := strings.Count(log, "released the denoiser"); n != 1 {
			t.Errorf("%s: the denoiser was released %d times, want once:\n%s", name, n, log)
		}
	}
	for i := range one[0] {
		if !bytes.Equal(one[0][i], two[0][i]) {
			t.Fatalf("frame %d of sample 0 differs between a run that released the denoiser before decoding it and one that did not", i)
		}
	}
	if bytes.Equal(two[0][0], two[1][0]) {
		t.Fatal("samples 0 and 1 have the same first frame: the second sample's steps did not run")
	}
}
