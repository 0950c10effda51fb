package generate

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// unitFrames returns deterministic frames [n, 3, h, w] in [0, 1].
func unitFrames(n, h, w int) *tensor.Dense {
	t := tensor.New(n, 3, h, w)
	for i := range t.Data {
		t.Data[i] = float32((i*37)%101) / 100
	}
	return t
}

func TestSampleWriterStreamsTheAllAtOnceFiles(t *testing.T) {
	const n, h, w = 7, 10, 12
	unit := unitFrames(n, h, w)
	dir := t.TempDir()
	out, err := newSampleWriter(filepath.Join(dir, "stream"), n, w, h, 7, "")
	if err != nil {
		t.Fatal(err)
	}
	releases := 0
	out.release = func() { releases++ }
	for _, c := range [][2]int{{0, 3}, {3, 6}, {6, 7}} {
		if err := out.add(c[0], unit.Rows(c[0], c[1]).Clone()); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.finish(); err != nil {
		t.Fatal(err)
	}
	if releases != 3 {
		t.Errorf("released the heap %d times for 3 chunks", releases)
	}
	frames, err := video.FramesFromTensor(unit)
	if err != nil {
		t.Fatal(err)
	}
	imgs := make([]image.Image, n)
	for i, f := range frames {
		imgs[i] = f
	}
	ref := filepath.Join(dir, "ref")
	if err := video.WritePNGFrames(filepath.Join(ref, "frames"), imgs); err != nil {
		t.Fatal(err)
	}
	if err := video.WriteGIFFile(filepath.Join(ref, "video.gif"), imgs, 7); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"video.gif", "frames/000.png", "frames/006.png"} {
		a, err1 := os.ReadFile(filepath.Join(dir, "stream", f))
		b, err2 := os.ReadFile(filepath.Join(ref, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: streamed file differs from the all-at-once writer's (%v, %v)", f, err1, err2)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "stream", "video.mp4")); err != nil {
		t.Errorf("no mp4 (%s): %v", out.enc, err)
	}
	want := video.Stats(unit)
	if got := out.stats.Stats(); got.Mean != want.Mean || got.Min != want.Min || got.Max != want.Max {
		t.Errorf("pixel stats %+v, want %+v", got, want)
	}
}

func TestSampleWriterRefusesMissingFrames(t *testing.T) {
	dir := t.TempDir()
	out, err := newSampleWriter(dir, 4, 8, 8, 7, "")
	if err != nil {
		t.Fatal(err)
	}
	out.release = func() {}
	if err := out.add(1, unitFrames(1, 8, 8)); err == nil {
		t.Error("frame 1 before frame 0: no error")
	}
	if err := out.add(0, unitFrames(2, 8, 8)); err != nil {
		t.Fatal(err)
	}
	if err := out.finish(); err == nil {
		t.Error("2 of 4 frames: finish gave no error")
	}
	out.abort()
	if ents, _ := os.ReadDir(filepath.Join(dir, "frames")); len(ents) != 0 {
		t.Errorf("abort left %d frames", len(ents))
	}
	if _, err := os.Stat(filepath.Join(dir, "video.mp4")); err == nil {
		t.Error("abort left an mp4")
	}
}
