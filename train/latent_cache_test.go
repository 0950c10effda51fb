package train

import (
	stdcontext "context"
	"io"
	"os"
	"testing"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// TestLatentCache: the UNet phase writes its encoded clips to the run folder; a resumed run
// reads them back and continues exactly as an uninterrupted run; the cached values are
// bit-identical to fresh encodes; a cache of another dataset, or a corrupt file, is
// ignored.
func TestLatentCache(t *testing.T) {
	if testing.Short() {
		t.Skip("three micro UNet runs")
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg := microConfigs()
	_, vcfg, ccfg, err := cfg.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	opts := func(dir, phase string, steps int, resume bool) Options {
		o := DefaultOptions()
		o.Dir, o.Phase, o.Steps, o.Resume, o.Configs = dir, phase, steps, resume, &cfg
		o.VAEFrames, o.VAECrop, o.CheckpointEvery, o.Train = 2, 16, 0, 2
		return o
	}
	run := func(o Options) Result {
		t.Helper()
		r, err := Run(stdcontext.Background(), b, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	straight, cut := t.TempDir(), t.TempDir()
	run(opts(straight, PhaseVAE, 1, false))
	copyFile(t, StatePath(straight, PhaseVAE), StatePath(cut, PhaseVAE))
	want := run(opts(straight, PhaseUNet, 2, false))
	run(opts(cut, PhaseUNet, 1, false))

	cache, err := safetensors.Open(LatentCachePath(cut))
	if err != nil {
		t.Fatalf("no latent cache after the first run: %v", err)
	}
	if len(cache.Names()) == 0 || cache.Metadata()[cacheKeyMeta] == "" {
		t.Fatalf("cache holds %d tensors, key %q", len(cache.Names()), cache.Metadata()[cacheKeyMeta])
	}
	cache.Close()

	o := opts(cut, PhaseUNet, 2, true)
	fz, err := newFrozen(b, cut, vcfg, ccfg, o.Seed, o.Data, o.Rule)
	if err != nil {
		t.Fatal(err)
	}
	if len(fz.raw) == 0 || len(fz.emb) == 0 {
		t.Fatalf("cache not loaded: %d latents, %d embeddings", len(fz.raw), len(fz.emb))
	}
	cached := fz.raw[0]
	fz.raw = map[int]*tensor.Dense{}
	if l, err := fz.rawLatents(0); err != nil || !tensor.BitEqual(l, cached) {
		t.Fatalf("cached latents of clip 0 differ from a fresh encode (err %v)", err)
	}

	if got := run(o); got.LastLoss != want.LastLoss {
		t.Fatalf("resumed from the cache: last loss %v, uninterrupted %v", got.LastLoss, want.LastLoss)
	}

	other, err := newFrozen(b, cut, vcfg, ccfg, o.Seed, o.Data+1, o.Rule)
	if err != nil {
		t.Fatal(err)
	}
	if len(other.raw) != 0 {
		t.Fatalf("a cache of dataset seed %d was used for seed %d", o.Data, o.Data+1)
	}

	if err := os.WriteFile(LatentCachePath(cut), []byte("not a safetensors file"), 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt, err := newFrozen(b, cut, vcfg, ccfg, o.Seed, o.Data, o.Rule)
	if err != nil {
		t.Fatalf("a corrupt cache stopped the phase: %v", err)
	}
	if len(corrupt.raw) != 0 {
		t.Fatal("entries read from a corrupt cache")
	}
	corrupt.raw[0], corrupt.cacheDirty = cached, true
	if err := corrupt.saveLatentCache(); err != nil {
		t.Fatal(err)
	}
	corrupt.loadLatentCache()
	if !tensor.BitEqual(corrupt.raw[0], cached) {
		t.Fatal("rewritten cache does not read back")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
