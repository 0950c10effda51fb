package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd"
)

func TestResolveAndLoad(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir())
	dir, err := Resolve(Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model_index.json")); err != nil {
		t.Fatal(err)
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	p, err := svd.Load(dir, "", b, svd.AllParts)
	if err != nil {
		t.Fatalf("svd.Load(builtin): %v", err)
	}
	defer p.Close()
	if p.UNetConfig.NumFrames != 14 || p.VAEConfig.DownsampleFactor() != 8 {
		t.Fatalf("config: %d frames, factor %d", p.UNetConfig.NumFrames, p.VAEConfig.DownsampleFactor())
	}
	other, err := Resolve(dir)
	if err != nil || other != dir {
		t.Fatalf("Resolve(dir) = %q, %v", other, err)
	}
	if _, err := Resolve(filepath.Join(dir, "missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing folder: %v", err)
	}
}

func TestExtractIsIdempotent(t *testing.T) {
	root := t.TempDir()
	a, err := Extract(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Extract(root)
	if err != nil || a != b {
		t.Fatalf("second extract %q %v, first %q", b, err, a)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Fatalf("%d entries in the cache root, want 1 (no leftovers)", len(entries))
	}
}

func TestSizeBudget(t *testing.T) {
	var total int64
	err := filepath.Walk("model", func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > 30<<20 {
		t.Fatalf("built-in model is %d bytes, over 30 MB", total)
	}
}

func TestDecodeChunk(t *testing.T) {
	for _, tc := range []struct {
		model       string
		chunk, want int
	}{
		{Name, -1, DecodeChunkSize},
		{"/some/svd", -1, 0},
		{Name, 0, 0},
		{"/some/svd", 3, 3},
	} {
		if got := DecodeChunk(tc.model, tc.chunk); got != tc.want {
			t.Errorf("DecodeChunk(%q, %d) = %d, want %d", tc.model, tc.chunk, got, tc.want)
		}
	}
}

func TestGuidance(t *testing.T) {
	for _, tc := range []struct {
		model            string
		minG, maxG       float64
		wantMin, wantMax float64
	}{
		{Name, -1, -1, MinGuidance, MaxGuidance},
		{"/some/svd", -1, -1, 1, 3},
		{Name, 1, -1, 1, MaxGuidance},
		{"/some/svd", -1, 1, 1, 1},
		{Name, 0, 0, 0, 0},
		{"/some/svd", 2.5, 7, 2.5, 7},
	} {
		gotMin, gotMax := Guidance(tc.model, tc.minG, tc.maxG)
		if gotMin != tc.wantMin || gotMax != tc.wantMax {
			t.Errorf("Guidance(%q, %v, %v) = %v, %v; want %v, %v", tc.model, tc.minG, tc.maxG, gotMin, gotMax, tc.wantMin, tc.wantMax)
		}
	}
}
