package train

import (
	stdcontext "context"
	"io"
	"os"
	"strings"
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

// TestEncodeAhead: encoding every training clip up front with concurrent workers fills the
// latent cache with exactly the values lazy encoding gives, for every clip, and a second
// run finds nothing left to encode.
func TestEncodeAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes micro clips")
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	// Started from a folder, the run takes its scaling factor from the folder's VAE config
	// and encodes nothing before encodeAhead, so every cached value comes from a worker.
	cfg, folder, _, _ := microFolder(t, 1)
	_, vcfg, ccfg, err := cfg.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := DefaultOptions()
	o.Dir, o.Configs, o.CheckpointEvery, o.Steps, o.InitFrom = dir, &cfg, 0, 0, folder
	o.Phase, o.Train, o.EncodeWorkers = PhaseUNet, 3, 2
	var log strings.Builder
	o.Progress = &log
	if _, err := Run(stdcontext.Background(), b, o); err != nil {
		t.Fatal(err)
	}
	fz, err := newFrozen(b, dir, vcfg, ccfg, o.Seed, o.Data, o.Rule)
	if err != nil {
		t.Fatal(err)
	}
	if len(fz.raw) != o.Train || len(fz.emb) != o.Train {
		t.Fatalf("cache holds %d latents and %d embeddings, want %d of each", len(fz.raw), len(fz.emb), o.Train)
	}
	lazy := &frozen{enc: fz.enc, clip: fz.clip, ccfg: fz.ccfg, dc: fz.dc, data: fz.data, split: fz.split,
		raw: map[int]*tensor.Dense{}, emb: map[int]*tensor.Dense{}}
	for i := 0; i < o.Train; i++ {
		l, err := lazy.rawLatents(i)
		if err != nil {
			t.Fatal(err)
		}
		e, err := lazy.embedding(i)
		if err != nil {
			t.Fatal(err)
		}
		if !tensor.BitEqual(l, fz.raw[i]) || !tensor.BitEqual(e, fz.emb[i]) {
			t.Fatalf("clip %d: encoded ahead differs from encoded lazily", i)
		}
	}
	if !strings.Contains(log.String(), "encoded 3/3 clips") {
		t.Fatalf("no progress line in %q", log.String())
	}
	log.Reset()
	if _, err := Run(stdcontext.Background(), b, o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "encoding") {
		t.Fatalf("second run encoded again: %q", log.String())
	}
}
