package generate

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
)

func TestResolveWindows(t *testing.T) {
	native14 := family.Description{Defaults: family.Params{NumFrames: 14}}
	wan := family.Description{Defaults: family.Params{NumFrames: 81}, FrameMultiple: 4,
		Windowing: family.Windowing{Window: 81, Overlap: 20, Blend: "cosine"}}
	for _, c := range []struct {
		name                    string
		frames, window, overlap int
		blend                   string
		wantWindow, wantOverlap int
		wantErr                 string
		desc                    family.Description
	}{
		{"native length", 14, 0, -1, "", 14, 3, "", native14},
		{"shorter than native", 7, 0, -1, "", 7, 1, "", native14},
		{"long video", 112, 0, -1, "", 14, 3, "", native14},
		{"explicit", 56, 8, 2, "linear", 8, 2, "", native14},
		{"overlap equals window", 56, 8, 8, "", 0, 0, "--overlap 8 must be shorter than --window 8", native14},
		{"window too long", 56, 20, -1, "", 0, 0, "--window 20 is longer than the model's 14 frames", native14},
		{"too few frames", 6, 8, 2, "", 0, 0, "--num-frames 6 is fewer than one --window of 8", native14},
		{"bad blend", 56, 8, 2, "step", 0, 0, `--blend "step"`, native14},
		// Wan: windows in latent frames (the VAE compresses time by 4, frame 0 alone).
		{"wan explicit", 17, 9, 4, "", 9, 4, "", wan},
		{"wan long default", 161, 0, -1, "", 81, 20, "", wan},
		{"wan native", 17, 0, -1, "", 17, 4, "", wan},
		{"wan window off the grid", 17, 10, 4, "", 0, 0, "--window 10: the model's causal VAE compresses time by 4, so a window takes 1 + 4k frames (e.g. 9 or 13)", wan},
		{"wan overlap off the grid", 17, 9, 6, "", 0, 0, "--overlap 6: the model's causal VAE compresses time by 4, so an overlap is a multiple of 4 frames (e.g. 4 or 8)", wan},
		{"wan overlap longer than window", 17, 9, 12, "", 0, 0, "--overlap 12 must be shorter than --window 9", wan},
		{"wan window too long", 201, 85, 4, "", 0, 0, "--window 85 is longer than the model's 81 frames", wan},
		{"wan too few frames", 5, 9, 4, "", 0, 0, "--num-frames 5 is fewer than one --window of 9", wan},
	} {
		o, err := c.desc.ResolveWindows(family.Params{NumFrames: c.frames, Window: c.window, Overlap: c.overlap, Blend: c.blend})
		err = flagError(err)
		if c.wantErr != "" {
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v, want one line with %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || o.Window != c.wantWindow || o.Overlap != c.wantOverlap || o.Blend == "" {
			t.Errorf("%s: window %d overlap %d blend %q, %v; want %d %d", c.name, o.Window, o.Overlap, o.Blend, err, c.wantWindow, c.wantOverlap)
		}
	}
}

// generateBuiltin runs a one-process generation on the built-in model and returns the
// PNG frames of sample 0.
func generateBuiltin(t *testing.T, frames, window, overlap int) [][]byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	for y := 20; y < 40; y++ {
		for x := 24; x < 36; x++ {
			img.Set(x, y, color.NRGBA{220, 40, 40, 255})
		}
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.png")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
	o := DefaultOptions()
	o.Model, o.Image, o.Out, o.Steps, o.NumFrames, o.Window, o.Overlap = builtin.Name, in, filepath.Join(dir, "out"), 1, frames, window, overlap
	o.Height, o.Width = 32, 32 // small and one step: the test is about frames, not quality
	if o, err = Resolve(o); err != nil {
		t.Fatal(err)
	}
	if err := RunRank(context.Background(), o, comm.SingleProcess(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	// The frames' pixels: the files also carry the job's parameters, which differ.
	paths, _ := filepath.Glob(filepath.Join(o.Out, "sample-000", "frames", "*.png"))
	var out [][]byte
	for _, p := range paths {
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
		out = append(out, rgba.Pix)
	}
	return out
}

// A video of the native length is one window: the explicit window flags change no bit, and
// a longer video gets every frame.
func TestWindowsNativeLengthUnchanged(t *testing.T) {
	plain := generateBuiltin(t, 0, 0, 0) // 0: not set, the model's
	windowed := generateBuiltin(t, 14, 14, 3)
	if len(plain) != 14 || len(windowed) != 14 {
		t.Fatalf("%d and %d frames, want 14", len(plain), len(windowed))
	}
	for i := range plain {
		if !bytes.Equal(plain[i], windowed[i]) {
			t.Fatalf("frame %d differs with --window 14 --overlap 3", i)
		}
	}
	long := generateBuiltin(t, 20, 8, 2)
	if len(long) != 20 {
		t.Fatalf("%d frames, want 20", len(long))
	}
}
