// Package builtin ships vdpp's own small image-to-video model inside the binary: a Stable
// Video Diffusion of the same architecture as the real one (same Go code, smaller
// configs), trained by `vdpp train` on the procedural dataset (see docs/builtin-model.md).
//
// Contract: the model is a diffusers folder embedded with go:embed. Dir materialises it
// once per content hash under the user cache directory (VDPP_CACHE_DIR overrides it), so
// the ordinary checkpoint loader (model/checkpoint, svd.Load) reads it like any other
// folder; Resolve maps the name "builtin" to that folder and leaves any other value alone,
// so every --model DIR flag also accepts --model builtin. Sampling gives the default
// guidance and decode chunk of a --model value: the folder's vdpp_sampling.json
// (checkpoint.SamplingFile; the built-in model's says 2 -> 4 and 7 frames), else SVD's.
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
	"sync"

	"github.com/vdpp/vdpp/model/checkpoint"
)

// Name is the --model value that selects the built-in model.
const Name = "builtin"

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

// Sampling returns the default sampling settings (guidance, decode chunk) of the model a
// --model value names: the built-in model's vdpp_sampling.json for "builtin", a folder's
// own (checkpoint.ReadSampling: SVD's defaults when it has none), and SVD's defaults for a
// value that is not a folder (a registered model name, or a path whose absence the
// checkpoint loader reports with its own error).
func Sampling(nameOrDir string) (checkpoint.Sampling, error) {
	if nameOrDir == Name {
		b, err := fs.ReadFile(FS(), checkpoint.SamplingFile)
		if err != nil {
			return checkpoint.Sampling{}, fmt.Errorf("builtin: %w", err)
		}
		return checkpoint.ParseSampling(Name+"/"+checkpoint.SamplingFile, b)
	}
	if st, err := os.Stat(nameOrDir); err != nil || !st.IsDir() {
		return checkpoint.DefaultSampling, nil
	}
	return checkpoint.ReadSampling(nameOrDir)
}

//go:embed all:model
var files embed.FS

// ErrNotFound is returned by Resolve for a model folder that does not exist.
var ErrNotFound = errors.New("builtin: model folder not found")

// FS returns the embedded diffusers folder (model_index.json at its root).
func FS() fs.FS {
	sub, err := fs.Sub(files, "model")
	if err != nil {
		panic(err) // the embedded tree always has "model"
	}
	return sub
}

// Hash returns a hex digest of the embedded folder's paths and contents.
func Hash() (string, error) {
	h := sha256.New()
	var paths []string
	err := fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("builtin: %w", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := fs.ReadFile(FS(), p)
		if err != nil {
			return "", fmt.Errorf("builtin: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CacheRoot returns where Dir materialises the model: $VDPP_CACHE_DIR, else the user
// cache directory's vdpp/, else the temporary directory's vdpp-cache/.
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
	hashOnce sync.Once
	hashSum  string
	hashErr  error
)

// cachedHash is Hash computed once per process.
func cachedHash() (string, error) {
	hashOnce.Do(func() { hashSum, hashErr = Hash() })
	return hashSum, hashErr
}

// Dir materialises the embedded model under CacheRoot()/builtin-<hash prefix> (a folder
// already there from an earlier run is reused) and returns its path.
func Dir() (string, error) { return Extract(CacheRoot()) }

// Extract writes the embedded folder to root/builtin-<hash prefix> unless it is already
// complete there, and returns that path. It writes into a temporary sibling and renames,
// so concurrent processes never see a partial folder.
func Extract(root string) (string, error) {
	sum, err := cachedHash()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(root, "builtin-"+sum[:16])
	if _, err := os.Stat(filepath.Join(dst, "model_index.json")); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("builtin: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".builtin-*")
	if err != nil {
		return "", fmt.Errorf("builtin: %w", err)
	}
	defer os.RemoveAll(tmp)
	err = fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out := filepath.Join(tmp, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := fs.ReadFile(FS(), p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("builtin: extract: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, statErr := os.Stat(filepath.Join(dst, "model_index.json")); statErr == nil {
			return dst, nil // another process won the race
		}
		return "", fmt.Errorf("builtin: extract: %w", err)
	}
	return dst, nil
}

// Resolve returns the folder a --model value names: Dir() for "builtin", otherwise
// nameOrDir itself, which must be an existing directory (ErrNotFound otherwise).
func Resolve(nameOrDir string) (string, error) {
	if nameOrDir == Name {
		return Dir()
	}
	st, err := os.Stat(nameOrDir)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: %q (use a diffusers folder or %q)", ErrNotFound, nameOrDir, Name)
	}
	return nameOrDir, nil
}
