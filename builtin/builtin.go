// Package builtin ships vdpp's own small models inside the binary, so `--model NAME` works
// from a fresh clone with nothing downloaded: "builtin", a Stable Video Diffusion of the
// same architecture as the real one (same Go code, smaller configs) trained by `vdpp train`
// on the procedural dataset (docs/builtin-model.md); "builtin-wan", a tiny Wan
// text-to-video folder with a umT5 text encoder and tokenizer and random weights, which
// takes --prompt end to end in about a second on a CPU (docs/wan.md); and
// "builtin-wan-i2v", the same for Wan 2.1 image-to-video (a CLIP image encoder too), which
// takes --image and --prompt.
//
// Contract: Models is the one table of built-in models; each is a diffusers folder embedded
// with go:embed. Model.Dir materialises it once per content hash under the user cache
// directory (VDPP_CACHE_DIR overrides it), so the ordinary checkpoint loaders read it like
// any other folder; Resolve maps a table name to that folder and leaves any other value
// alone, so every --model DIR flag also accepts the built-in names. Sampling gives the
// default sampling settings of a --model value: the folder's vdpp_sampling.json
// (checkpoint.SamplingFile; the built-in SVD's says guidance 2 -> 4 and 7-frame decode
// chunks, the built-in Wan's its small sizes), else SVD's. The functions without a Model
// (Dir, Extract, FS, Hash) are the built-in SVD's ("builtin").
package builtin

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/vdpp/vdpp/model/checkpoint"
)

// Name is the --model value that selects the built-in SVD model.
const Name = "builtin"

// WanName is the --model value that selects the built-in Wan text-to-video model.
const WanName = "builtin-wan"

// WanI2VName is the --model value that selects the built-in Wan image-to-video model.
const WanI2VName = "builtin-wan-i2v"

// Model is one built-in model: the --model value and the embedded folder it names.
type Model struct {
	// Name is the --model value ("builtin").
	Name string
	// Folder is the embedded folder under builtin/ (model_index.json at its root).
	Folder string
	// About says in one line what the model is (listings, error messages).
	About string
}

// Models is the table of built-in models; a new one is a folder under builtin/ (added to
// the go:embed line below) and an entry here.
var Models = []Model{
	{Name: Name, Folder: "model", About: "Stable Video Diffusion image-to-video, 64x64, 14 frames, trained on flying arrows (docs/builtin-model.md)"},
	{Name: WanName, Folder: "wan", About: "Wan text-to-video with a umT5 text encoder, random weights, 17 frames at 160x96 (docs/wan.md)"},
	{Name: WanI2VName, Folder: "wan-i2v", About: "Wan 2.1 image-to-video (CLIP image encoder, umT5 text encoder), random weights, 17 frames at 160x96 (docs/wan.md)"},
}

//go:embed all:model all:wan all:wan-i2v
var files embed.FS

// Lookup returns the built-in model named name.
func Lookup(name string) (Model, bool) {
	for _, m := range Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

// Names lists the built-in models' names, in table order.
func Names() []string {
	out := make([]string, len(Models))
	for i, m := range Models {
		out[i] = m.Name
	}
	return out
}

// DecodeChunkSize is the number of frames the built-in model's VAE decodes together by
// default: its temporal decoder was trained on 7-frame clips, and two chunks decode at once
// on two cores (vae.Model.Decode). The model folder's vdpp_sampling.json says the same (a
// test checks).
const DecodeChunkSize = 7

// MinGuidance and MaxGuidance are the built-in model's default classifier-free guidance
// weights of the first and the last frame (SVD's are 1 and 3), also in its
// vdpp_sampling.json. Measured with `vdpp eval` (docs/builtin-model.md, the guidance
// sweep): on 16 held-out clips a first-frame weight of 2 or more scored 0.3 dB above SVD's
// 1 -> 3 for an earlier UNet, and weights past 4 gained nothing; for the shipped weights the
// two are within 0.04 dB on 32 clips.
const (
	MinGuidance = 2.0
	MaxGuidance = 4.0
)

// Sampling returns the default sampling settings (guidance, decode chunk, and a small
// model's sizes) of the model a --model value names: a built-in model's vdpp_sampling.json,
// a folder's own (checkpoint.ReadSampling: SVD's defaults when it has none), and SVD's
// defaults for a value that is not a folder (a registered model name, or a path whose
// absence the checkpoint loader reports with its own error).
func Sampling(nameOrDir string) (checkpoint.Sampling, error) {
	if m, ok := Lookup(nameOrDir); ok {
		b, err := fs.ReadFile(m.FS(), checkpoint.SamplingFile)
		if errors.Is(err, fs.ErrNotExist) {
			return checkpoint.DefaultSampling, nil
		}
		if err != nil {
			return checkpoint.Sampling{}, fmt.Errorf("%s: %w", m.Name, err)
		}
		return checkpoint.ParseSampling(m.Name+"/"+checkpoint.SamplingFile, b)
	}
	if st, err := os.Stat(nameOrDir); err != nil || !st.IsDir() {
		return checkpoint.DefaultSampling, nil
	}
	return checkpoint.ReadSampling(nameOrDir)
}

// ErrNotFound is returned by Resolve for a model folder that does not exist.
var ErrNotFound = errors.New("model folder not found")

// builtinSVD is the table's entry of the built-in SVD model.
func builtinSVD() Model {
	m, _ := Lookup(Name)
	return m
}

// FS returns the built-in SVD's embedded folder (Model.FS).
func FS() fs.FS { return builtinSVD().FS() }

// Hash returns the built-in SVD's digest (Model.Hash).
func Hash() (string, error) { return builtinSVD().Hash() }

// Dir materialises the built-in SVD model (Model.Dir) and returns its folder.
func Dir() (string, error) { return builtinSVD().Dir() }

// Extract writes the built-in SVD model under root (Model.Extract).
func Extract(root string) (string, error) { return builtinSVD().Extract(root) }

// FS returns the model's embedded diffusers folder (model_index.json at its root).
func (m Model) FS() fs.FS {
	sub, err := fs.Sub(files, m.Folder)
	if err != nil {
		panic(err) // the table names embedded folders (a test checks)
	}
	return sub
}

// Hash returns a hex digest of the model's embedded paths and contents.
func (m Model) Hash() (string, error) {
	h := sha256.New()
	var paths []string
	err := fs.WalkDir(m.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.Name, err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := fs.ReadFile(m.FS(), p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", m.Name, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CacheRoot returns where Model.Dir materialises the models: $VDPP_CACHE_DIR, else the
// user cache directory's vdpp/, else the temporary directory's vdpp-cache/.
func CacheRoot() string {
	if d := os.Getenv("VDPP_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "vdpp")
	}
	return filepath.Join(os.TempDir(), "vdpp-cache")
}

var (
	hashMu sync.Mutex
	hashes = map[string]func() (string, error){}
)

// cachedHash is m.Hash computed once per process.
func (m Model) cachedHash() (string, error) {
	hashMu.Lock()
	f, ok := hashes[m.Name]
	if !ok {
		f = sync.OnceValues(m.Hash)
		hashes[m.Name] = f
	}
	hashMu.Unlock()
	return f()
}

// Dir materialises the model under CacheRoot()/<name>-<hash prefix> (a folder already
// there from an earlier run is reused) and returns its path.
func (m Model) Dir() (string, error) { return m.Extract(CacheRoot()) }

// Extract writes the embedded folder to root/<name>-<hash prefix> unless it is already
// complete there, and returns that path. It writes into a temporary sibling and renames,
// so concurrent processes never see a partial folder.
func (m Model) Extract(root string) (string, error) {
	sum, err := m.cachedHash()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(root, m.Name+"-"+sum[:16])
	if _, err := os.Stat(filepath.Join(dst, checkpoint.IndexFile)); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", m.Name, err)
	}
	tmp, err := os.MkdirTemp(root, "."+m.Name+"-*")
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.Name, err)
	}
	defer os.RemoveAll(tmp)
	err = fs.WalkDir(m.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out := filepath.Join(tmp, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := fs.ReadFile(m.FS(), p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("%s: extract: %w", m.Name, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, statErr := os.Stat(filepath.Join(dst, checkpoint.IndexFile)); statErr == nil {
			return dst, nil // another process won the race
		}
		return "", fmt.Errorf("%s: extract: %w", m.Name, err)
	}
	return dst, nil
}

// Resolve returns the folder a --model value names: Model.Dir for a built-in model's name,
// otherwise nameOrDir itself, which must be an existing directory (ErrNotFound otherwise).
func Resolve(nameOrDir string) (string, error) {
	if m, ok := Lookup(nameOrDir); ok {
		return m.Dir()
	}
	st, err := os.Stat(nameOrDir)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: %q (use a diffusers folder or one of %s)", ErrNotFound, nameOrDir, strings.Join(Names(), ", "))
	}
	return nameOrDir, nil
}
