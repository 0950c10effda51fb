package video

import (
	"bytes"
	"errors"
	"image"
	"image/gif"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

// encodeAllGIF is WriteGIF as it was before frames could be streamed: every frame
// dithered, then one gif.EncodeAll.
func encodeAllGIF(t *testing.T, frames []image.Image, fps float64) []byte {
	t.Helper()
	inv := newInverseMap(medianCutPalette(frames, 256))
	g := &gif.GIF{LoopCount: 0}
	for _, f := range frames {
		g.Image = append(g.Image, ditherFloydSteinberg(f, inv))
		g.Delay = append(g.Delay, gifDelay(fps))
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriteGIFFramesMatchesEncodeAll(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		frames := gradientFrames(n, 37, 21)
		want := encodeAllGIF(t, frames, 7)
		var got bytes.Buffer
		if err := WriteGIF(&got, frames, 7); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%d frames: WriteGIF differs from gif.EncodeAll (%d vs %d bytes)", n, got.Len(), len(want))
		}
		// Streamed: the histogram frame by frame, the frames fetched back one at a time.
		h := NewHistogram()
		for _, f := range frames {
			h.Add(f)
		}
		got.Reset()
		if err := WriteGIFFrames(&got, h.Palette(256), n, func(i int) (image.Image, error) { return frames[i], nil }, 7); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%d frames: streamed GIF differs from gif.EncodeAll", n)
		}
	}
	boom := errors.New("boom")
	err := WriteGIFFrames(&bytes.Buffer{}, NewHistogram().Palette(256), 2, func(i int) (image.Image, error) {
		if i == 1 {
			return nil, boom
		}
		return gradientFrames(1, 4, 4)[0], nil
	}, 7)
	if !errors.Is(err, boom) {
		t.Errorf("failing frame source: %v", err)
	}
	big := gradientFrames(1, 8, 8)[0]
	err = WriteGIFFrames(&bytes.Buffer{}, NewHistogram().Palette(256), 2, func(i int) (image.Image, error) {
		if i == 1 {
			return big, nil
		}
		return gradientFrames(1, 4, 4)[0], nil
	}, 7)
	if err == nil {
		t.Error("a frame larger than the first: no error")
	}
}

func TestPNGFramesRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "frames")
	frames := gradientFrames(3, 9, 7)
	p, err := NewPNGFrames(dir, 1001)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if err := p.Write(i, f); err != nil {
			t.Fatal(err)
		}
	}
	if filepath.Base(p.Path(2)) != "0002.png" {
		t.Errorf("frame 2 of 1001 is %s", p.Path(2))
	}
	for i, f := range frames {
		img, err := p.Read(i)
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := rgb8(img)
		want, _, _ := rgb8(f)
		if !bytes.Equal(got, want) {
			t.Errorf("frame %d changed", i)
		}
	}
	p.Remove()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Remove left %d files", len(ents))
	}
	if _, err := NewPNGFrames(dir, 0); !errors.Is(err, ErrNoFrames) {
		t.Errorf("no frames: %v", err)
	}
}

func TestMP4StreamAbort(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-ffmpeg")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nfor a; do last=$a; done\ncat > \"$last\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := MP4Writer{LookPath: func(string) (string, error) { return fake, nil }}
	frames := gradientFrames(2, 4, 4)
	out := filepath.Join(dir, "v.mp4")
	s, err := w.Start(out, 4, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(frames[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(gradientFrames(1, 6, 4)[0]); err == nil {
		t.Error("a frame of another size: no error")
	}
	if err := s.Abort(); err != nil {
		t.Errorf("abort: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("abort left %d entries (want only the fake ffmpeg)", len(ents))
	}
	s, err = w.Start(out, 4, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := s.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(out); err != nil || len(raw) != 2*4*4*3 {
		t.Errorf("raw output %d bytes, %v", len(raw), err)
	}
}

func TestStatsAccumulatorMatchesStats(t *testing.T) {
	x := make([]float32, 10007)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37))*0.5 + 0.4
	}
	want := Stats(&tensor.Dense{Shape: []int{len(x)}, Data: x})
	var a StatsAccumulator
	for i := 0; i < len(x); i += 1000 {
		a.Add(x[i:min(i+1000, len(x))])
	}
	got := a.Stats()
	if got.Min != want.Min || got.Max != want.Max || got.Mean != want.Mean || math.Abs(got.Std-want.Std) > 1e-12*want.Std {
		t.Errorf("accumulated %+v, Stats %+v", got, want)
	}
	if (&StatsAccumulator{}).Stats() != (FrameStats{}) {
		t.Error("empty accumulator is not zeros")
	}
}
