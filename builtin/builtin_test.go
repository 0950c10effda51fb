package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
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

func TestSampling(t *testing.T) {
	got, err := Sampling(Name)
	if err != nil {
		t.Fatal(err)
	}
	if want := (checkpoint.Sampling{MinGuidance: MinGuidance, MaxGuidance: MaxGuidance, DecodeChunkSize: DecodeChunkSize}); got != want {
		t.Fatalf("the embedded vdpp_sampling.json says %+v, the constants %+v", got, want)
	}
	// A folder: its own file, or SVD's defaults without one.
	own, plain := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(own, checkpoint.SamplingFile), []byte(`{"min_guidance": 1.5, "max_guidance": 5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		want  checkpoint.Sampling
	}{
		{own, checkpoint.Sampling{MinGuidance: 1.5, MaxGuidance: 5}},
		{plain, checkpoint.DefaultSampling},
		{"synthetic", checkpoint.DefaultSampling},
		{filepath.Join(plain, "missing"), checkpoint.DefaultSampling},
	} {
		if got, err := Sampling(tc.model); err != nil || got != tc.want {
			t.Errorf("Sampling(%q) = %+v, %v; want %+v", tc.model, got, err, tc.want)
		}
	}
	if err := os.WriteFile(filepath.Join(own, checkpoint.SamplingFile), []byte(`{"max_guidance": 0.5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Sampling(own); !errors.Is(err, checkpoint.ErrSampling) {
		t.Fatalf("min 1 > max 0.5: %v, want checkpoint.ErrSampling", err)
	}
}
