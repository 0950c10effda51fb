package builtin

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/model/wan"
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
	// The binary carries every built-in model: the SVD at most 30 MB, the random-weights
	// Wan (there to try commands on) a few MB.
	budget := map[string]int64{Name: 30 << 20, WanName: 3 << 20}
	for _, m := range Models {
		var total int64
		err := filepath.Walk(m.Folder, func(_ string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				total += info.Size()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		b, ok := budget[m.Name]
		if !ok {
			b = 30 << 20
		}
		if total > b {
			t.Errorf("built-in model %s is %d bytes, over its %d", m.Name, total, b)
		}
	}
}

// TestModelsTable checks the table: unique names that Lookup finds, each an embedded
// folder with a model_index.json, and Resolve materialising each in its own folder.
func TestModelsTable(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir())
	seen := map[string]bool{}
	dirs := map[string]bool{}
	for _, m := range Models {
		if seen[m.Name] {
			t.Fatalf("%s twice in Models", m.Name)
		}
		seen[m.Name] = true
		if got, ok := Lookup(m.Name); !ok || got != m {
			t.Fatalf("Lookup(%q) = %+v, %v", m.Name, got, ok)
		}
		if m.About == "" {
			t.Errorf("%s says nothing about itself", m.Name)
		}
		dir, err := Resolve(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, checkpoint.IndexFile)); err != nil {
			t.Fatal(err)
		}
		if dirs[dir] {
			t.Fatalf("%s shares its folder %s", m.Name, dir)
		}
		dirs[dir] = true
	}
	if _, ok := Lookup("builtin-nope"); ok {
		t.Fatal("Lookup found a name not in the table")
	}
	_, err := Resolve("builtin-nope")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), WanName) {
		t.Fatalf("unknown name: %v; want ErrNotFound listing the built-in names", err)
	}
}

// TestBuiltinSources checks that builtin/wan and builtin/wan-i2v hold exactly the reference
// components they say they do (their README.md): wan-dev's transformer, VAE and scheduler,
// model/wan/testdata/i2v/wan21-i2v's components, and the prompts' text encoder and
// tokenizer. VDPP_WRITE_BUILTIN_WAN=1 copies them in again.
func TestBuiltinSources(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	prompts := filepath.Join("..", "model", "wan", "testdata", "prompts")
	i2v := filepath.Join("..", "model", "wan", "testdata", "i2v", "wan21-i2v")
	text := map[string]string{
		"text_encoder/config.json":       filepath.Join(prompts, "text_encoder", "config.json"),
		"text_encoder/model.safetensors": filepath.Join(prompts, "text_encoder", "model.safetensors"),
		"tokenizer/spiece.model":         filepath.Join(prompts, "tokenizer", "spiece.model"),
	}
	from := func(dir string, names ...string) map[string]string {
		out := maps.Clone(text)
		for _, n := range names {
			out[n] = filepath.Join(dir, filepath.FromSlash(n))
		}
		return out
	}
	for folder, sources := range map[string]map[string]string{
		"wan": from(dev, "transformer/config.json", "transformer/diffusion_pytorch_model.safetensors", "vae/config.json",
			"vae/diffusion_pytorch_model.safetensors", "scheduler/scheduler_config.json"),
		"wan-i2v": from(i2v, "transformer/config.json", "transformer/diffusion_pytorch_model.safetensors", "vae/config.json",
			"vae/diffusion_pytorch_model.safetensors", "scheduler/scheduler_config.json", "image_encoder/config.json",
			"image_encoder/model.safetensors", "image_processor/preprocessor_config.json"),
	} {
		t.Run(folder, func(t *testing.T) { checkSources(t, folder, sources) })
	}
}

// checkSources checks that builtin/folder holds the files of sources (its path -> the
// reference file) byte for byte and nothing else besides its own files.
func checkSources(t *testing.T, folder string, sources map[string]string) {
	write := os.Getenv("VDPP_WRITE_BUILTIN_WAN") != ""
	for name, src := range sources {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(folder, filepath.FromSlash(name))
		if write {
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("builtin/%s/%s differs from %s (VDPP_WRITE_BUILTIN_WAN=1 copies it)", folder, name, src)
		}
	}
	// Nothing else but the folder's own files.
	own := map[string]bool{"model_index.json": true, "vdpp_sampling.json": true, "README.md": true}
	err := fs.WalkDir(os.DirFS(folder), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && sources[p] == "" && !own[p] {
			t.Errorf("builtin/%s/%s is neither a reference component nor the folder's own file", folder, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
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

// TestBuiltinWanSpeaks loads the built-in Wan as a Wan folder: its defaults are its
// vdpp_sampling.json's small sizes, and its tokenizer and text encoder turn two prompts
// into different embeddings of the transformer's text width.
func TestBuiltinWanSpeaks(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir())
	dir, err := Resolve(WanName)
	if err != nil {
		t.Fatal(err)
	}
	f, err := wan.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Experts() != 1 {
		t.Errorf("%d experts, want 1 (a Wan 2.1 folder)", f.Experts())
	}
	p, err := f.DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	if p.NumFrames != 17 || p.Height != 96 || p.Width != 160 || p.Steps != 20 || p.GuidanceScale != 5 {
		t.Errorf("defaults %+v, want 17 frames at 160x96, 20 steps, guidance 5 (vdpp_sampling.json)", p)
	}
	s, err := wan.Load(dir, family.Options{Backend: "go", Roles: family.Roles{Condition: true}, Prompts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.Text.Embeds("A red fox runs through the snow at dawn")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Text.Embeds("two cats play in the garden")
	if err != nil {
		t.Fatal(err)
	}
	if sh := a.Shape; sh[len(sh)-1] != s.TConfig.TextDim {
		t.Fatalf("embeddings %v, want width %d", sh, s.TConfig.TextDim)
	}
	same := true
	for i, v := range a.Data {
		if v != b.Data[i] {
			same = false
			break
		}
	}
	if same {
		t.Fatal("two prompts gave the same embeddings")
	}
}
