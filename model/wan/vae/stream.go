package vae

import (
	"fmt"
	"slices"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// EncodeCache is the state of one streamed encode: the causal caches of every layer (one
// set per tile when tiled), kept on the backend between chunks (nn.State: never copied to
// the host, each chunk's handed to the next's run), and the chunks seen. The zero value is
// not usable; get one from NewEncodeCache, and Close it when the stream is done. It belongs
// to one stream and is not safe for concurrent use.
type EncodeCache struct {
	chunks int
	shape  []int                  // [B, C, H, W] of the first chunk
	slots  map[[2]int][]*nn.State // per tile origin ({0, 0} untiled)
}

// DecodeCache is the state of one streamed decode, as EncodeCache.
type DecodeCache struct {
	frames int
	shape  []int
	slots  map[[2]int][]*nn.State
}

// NewEncodeCache returns the empty cache a streamed encode starts from.
func (v *VAE) NewEncodeCache() *EncodeCache {
	return &EncodeCache{slots: map[[2]int][]*nn.State{}}
}

// NewDecodeCache returns the empty cache a streamed decode starts from.
func (v *VAE) NewDecodeCache() *DecodeCache {
	return &DecodeCache{slots: map[[2]int][]*nn.State{}}
}

// Close frees the caches' buffers; the cache must not be used afterwards.
func (c *EncodeCache) Close() { closeSlots(c.slots) }

// Close frees the caches' buffers; the cache must not be used afterwards.
func (c *DecodeCache) Close() { closeSlots(c.slots) }

func closeSlots(slots map[[2]int][]*nn.State) {
	for k, ss := range slots {
		for _, s := range ss {
			s.Close()
		}
		delete(slots, k)
	}
}

// Chunks returns how many chunks the cache has seen.
func (c *EncodeCache) Chunks() int { return c.chunks }

// Frames returns how many latent frames the cache has seen.
func (c *DecodeCache) Frames() int { return c.frames }

// sameStream checks that a chunk has the batch, channels and frame size of the first.
func sameStream(shape *[]int, t *tensor.Dense, what string) error {
	key := []int{t.Shape[0], t.Shape[1], t.Shape[3], t.Shape[4]}
	if *shape == nil {
		*shape = key
		return nil
	}
	if !slices.Equal(*shape, key) {
		return fmt.Errorf("%w: %s %v does not continue a stream of [%d, %d, ·, %d, %d]", ErrInput, what, t.Shape, (*shape)[0], (*shape)[1], (*shape)[2], (*shape)[3])
	}
	return nil
}

// EncodeChunk encodes the next chunk of a video through cache: the first chunk is the
// video's first frame [B, C, 1, H, W], every later one the next 4 frames. It returns the
// chunk's moments [B, 2z, t, H/S, W/S] (the quant_conv output; NewPosterior splits them);
// the chunks' moments concatenated in time equal Encode's.
func (v *VAE) EncodeChunk(cache *EncodeCache, chunk *tensor.Dense) (*tensor.Dense, error) {
	if err := checkTensor(chunk, 5, v.cfg.videoChannels(false), "video chunk"); err != nil {
		return nil, err
	}
	want := EncodeChunkFrames
	if cache.chunks == 0 {
		want = 1
	}
	if chunk.Shape[2] != want {
		return nil, fmt.Errorf("%w: encode chunk %d has %d frames; the causal VAE takes the first frame alone, then chunks of %d", ErrFrames, cache.chunks, chunk.Shape[2], EncodeChunkFrames)
	}
	s := v.cfg.SpatialFactor()
	if chunk.Shape[3]%s != 0 || chunk.Shape[4]%s != 0 {
		return nil, fmt.Errorf("%w: video chunk %v: height and width must be multiples of %d", ErrInput, chunk.Shape, s)
	}
	if err := sameStream(&cache.shape, chunk, "video chunk"); err != nil {
		return nil, err
	}
	h, w := chunk.Shape[3], chunk.Shape[4]
	t := v.opts.Tiling
	var out *tensor.Dense
	var err error
	if t == nil || (w <= t.MinWidth && h <= t.MinHeight) {
		out, err = v.runStep(v.enc, cache.slots, [2]int{}, chunk)
	} else {
		// diffusers' tiled_encode: tiles in pixels, blended in latent space.
		var tiles [][]*tensor.Dense
		for _, i := range tileGrid(h, t.StrideHeight) {
			var row []*tensor.Dense
			for _, j := range tileGrid(w, t.StrideWidth) {
				tile := sliceBox(chunk, 0, chunk.Shape[2], i, i+t.MinHeight, j, j+t.MinWidth)
				m, err := v.runStep(v.enc, cache.slots, [2]int{i, j}, tile)
				if err != nil {
					return nil, err
				}
				row = append(row, m)
			}
			tiles = append(tiles, row)
		}
		out, err = blendTiles(tiles, (t.MinHeight-t.StrideHeight)/s, (t.MinWidth-t.StrideWidth)/s,
			t.StrideHeight/s, t.StrideWidth/s, h/s, w/s)
	}
	if err != nil {
		return nil, err
	}
	cache.chunks++
	return out, nil
}

// DecodeFrame decodes the next latent frame [B, z, 1, h, w] of a video through cache and
// returns its video frames [B, C, n, h·S, w·S]: n = 1 for the first latent frame, T for
// every later one. Untiled frames are clamped to [-1, 1]; tiled ones are not (diffusers'
// tiled_decode does not clamp).
func (v *VAE) DecodeFrame(cache *DecodeCache, latent *tensor.Dense) (*tensor.Dense, error) {
	if err := checkTensor(latent, 5, v.cfg.ZDim, "latent frame"); err != nil {
		return nil, err
	}
	if latent.Shape[2] != 1 {
		return nil, fmt.Errorf("%w: DecodeFrame takes one latent frame, got %v", ErrFrames, latent.Shape)
	}
	if err := sameStream(&cache.shape, latent, "latent frame"); err != nil {
		return nil, err
	}
	h, w := latent.Shape[3], latent.Shape[4]
	t := v.opts.Tiling
	r := v.cfg.SpatialFactor()
	var out *tensor.Dense
	var err error
	if t == nil || (w <= t.MinWidth/r && h <= t.MinHeight/r) {
		out, err = v.runStep(v.dec, cache.slots, [2]int{}, latent)
		if err == nil {
			clampUnit(out)
		}
	} else {
		// diffusers' tiled_decode: tiles in latents, blended in pixels, not clamped.
		var tiles [][]*tensor.Dense
		for _, i := range tileGrid(h, t.StrideHeight/r) {
			var row []*tensor.Dense
			for _, j := range tileGrid(w, t.StrideWidth/r) {
				tile := sliceBox(latent, 0, 1, i, i+t.MinHeight/r, j, j+t.MinWidth/r)
				f, err := v.runStep(v.dec, cache.slots, [2]int{i, j}, tile)
				if err != nil {
					return nil, err
				}
				row = append(row, f)
			}
			tiles = append(tiles, row)
		}
		out, err = blendTiles(tiles, t.MinHeight-t.StrideHeight, t.MinWidth-t.StrideWidth,
			t.StrideHeight, t.StrideWidth, h*r, w*r)
	}
	if err != nil {
		return nil, err
	}
	cache.frames++
	return out, nil
}

// runStep runs one chunk through p with the caches of tile key and stores the caches it
// leaves for the next chunk.
func (v *VAE) runStep(p *nn.Program, slots map[[2]int][]*nn.State, key [2]int, x *tensor.Dense) (*tensor.Dense, error) {
	out, next, err := p.RunState(1, []*tensor.Dense{x}, slots[key])
	slots[key] = next // the previous caches were consumed by the run
	if err != nil {
		return nil, fmt.Errorf("wan/vae: %v of %v: %w", key, x.Shape, err)
	}
	return out[0], nil
}
