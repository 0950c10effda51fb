package train

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// LatentCachePath is the UNet phase's cache of encoded training clips in a run folder:
// every clip's VAE latents (unscaled) and first-frame image embedding, so that a resumed
// run does not encode its clips again. It is only a cache: a missing, corrupt or stale file
// (another encoder, image encoder, rule or dataset) is ignored and rewritten.
func LatentCachePath(dir string) string { return filepath.Join(dir, "unet-latents.cache.safetensors") }

const (
	cacheKeyMeta   = "key"
	cacheLatPrefix = "latents."
	cacheEmbPrefix = "embedding."
)

// latentCacheKey identifies what the cached values are a function of: the encoder's
// weights, the image encoder's config and seed, and the dataset (config with its rule,
// seed, split).
func latentCacheKey(encW map[string]*tensor.Dense, ccfg clip.Config, clipSeed uint64, f *frozen) string {
	h := sha256.New()
	fmt.Fprintf(h, "vdpp latent cache v1\n%+v\n%d\n%+v\n%d %v\n", ccfg, clipSeed, f.dc, f.data, f.split)
	names := make([]string, 0, len(encW))
	for n := range encW {
		names = append(names, n)
	}
	slices.Sort(names)
	var b [4]byte
	for _, n := range names {
		t := encW[n]
		fmt.Fprintf(h, "%s %v\n", n, t.Shape)
		for _, v := range t.Data {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// loadLatentCache fills f's raw latents and embeddings from the cache file when its key
// matches f.cacheKey. Anything wrong with the file means an empty cache, not an error.
func (f *frozen) loadLatentCache() {
	sf, err := safetensors.Open(f.cachePath)
	if err != nil {
		return
	}
	defer sf.Close()
	if sf.Metadata()[cacheKeyMeta] != f.cacheKey {
		return
	}
	raw, emb := map[int]*tensor.Dense{}, map[int]*tensor.Dense{}
	for _, name := range sf.Names() {
		prefix, dst := cacheLatPrefix, raw
		if strings.HasPrefix(name, cacheEmbPrefix) {
			prefix, dst = cacheEmbPrefix, emb
		}
		i, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if err != nil || !strings.HasPrefix(name, prefix) {
			return
		}
		if info, _ := sf.Info(name); info.DType != safetensors.F32 {
			return
		}
		t, err := sf.Tensor(name)
		if err != nil {
			return
		}
		dst[i] = t
	}
	f.raw, f.emb = raw, emb
}

// saveLatentCache writes the cache file when clips were encoded since the last write.
func (f *frozen) saveLatentCache() error {
	if !f.cacheDirty || f.cachePath == "" {
		return nil
	}
	var named []safetensors.NamedTensor
	for prefix, m := range map[string]map[int]*tensor.Dense{cacheLatPrefix: f.raw, cacheEmbPrefix: f.emb} {
		for i, t := range m {
			named = append(named, safetensors.NamedTensor{Name: prefix + strconv.Itoa(i), Tensor: t})
		}
	}
	if err := safetensors.WriteFile(f.cachePath, named, map[string]string{cacheKeyMeta: f.cacheKey}); err != nil {
		return fmt.Errorf("train: latent cache: %w", err)
	}
	f.cacheDirty = false
	return nil
}
