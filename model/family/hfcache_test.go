package family_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/family"
)

// hfRepo lays out models--ORG--NAME in cache with refs (name -> hash) and snapshot folders.
func hfRepo(t *testing.T, cache, id string, refs map[string]string) string {
	t.Helper()
	repo := filepath.Join(cache, "models--"+strings.ReplaceAll(id, "/", "--"))
	for ref, hash := range refs {
		if err := os.MkdirAll(filepath.Join(repo, "snapshots", hash), 0o755); err != nil {
			t.Fatal(err)
		}
		if ref == "" {
			continue
		}
		p := filepath.Join(repo, "refs", ref)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(hash+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return repo
}

func TestResolveHF(t *testing.T) {
	home := t.TempDir()
	main, v1, loose := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	repo := hfRepo(t, filepath.Join(home, "hub"), "org/model", map[string]string{"main": main, "v1.0": v1, "": loose})
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	byHome := env(map[string]string{"HF_HOME": home})
	for name, want := range map[string]string{
		"org/model":          filepath.Join(repo, "snapshots", main),
		"org/model@v1.0":     filepath.Join(repo, "snapshots", v1),
		"org/model@" + loose: filepath.Join(repo, "snapshots", loose),
	} {
		if got, err := family.ResolveHF(name, byHome); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	// HF_HUB_CACHE wins over HF_HOME.
	byHub := env(map[string]string{"HF_HOME": "/nowhere", "HF_HUB_CACHE": filepath.Join(home, "hub")})
	if got, err := family.ResolveHF("org/model", byHub); err != nil || got != filepath.Join(repo, "snapshots", main) {
		t.Errorf("HF_HUB_CACHE: %q, %v", got, err)
	}
	for name, want := range map[string]string{
		"org/other":                            "org/other is not in the Hugging Face cache (no " + filepath.Join(home, "hub", "models--org--other") + "; vdpp reads the cache offline; fetch it first, e.g. huggingface-cli download org/other)",
		"org/model@v2":                         `no revision "v2"`,
		"org/model@" + strings.Repeat("d", 40): "no snapshot",
	} {
		_, err := family.ResolveHF(name, byHome)
		if !errors.Is(err, family.ErrNotCached) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want ErrNotCached with %q", name, err, want)
		}
	}
	userHome, _ := os.UserHomeDir()
	if d := family.HFCacheDir(env(nil)); d != filepath.Join(userHome, ".cache", "huggingface", "hub") {
		t.Errorf("default cache %q", d)
	}
	if d := family.HFCacheDir(env(map[string]string{"XDG_CACHE_HOME": "/x"})); d != "/x/huggingface/hub" {
		t.Errorf("XDG cache %q", d)
	}
}

// --model ORG/NAME resolves through the cache to the snapshot's family (here the built-in
// model's folder as the snapshot).
func TestResolveHFModel(t *testing.T) {
	builtin, err := family.Resolve("builtin")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	hash := strings.Repeat("e", 40)
	repo := hfRepo(t, filepath.Join(home, "hub"), "vdpp/tiny-svd", map[string]string{"main": hash})
	snap := filepath.Join(repo, "snapshots", hash)
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(builtin.Dir, snap); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	m, err := family.Resolve("vdpp/tiny-svd")
	if err != nil || m.Dir != snap || m.Family.Name() != builtin.Family.Name() {
		t.Fatalf("%+v, %v; want %s of family %s", m, err, snap, builtin.Family.Name())
	}
	if _, err := family.Resolve("vdpp/absent"); !errors.Is(err, family.ErrNotCached) {
		t.Fatalf("absent: %v", err)
	}
	if _, err := family.Resolve("no-such-thing"); !errors.Is(err, family.ErrUnknown) {
		t.Fatalf("unknown: %v", err)
	}
}
