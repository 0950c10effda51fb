package vae

import (
	"fmt"

	"github.com/vdpp/vdpp/tensor"
)

// Tiling is diffusers' enable_tiling for AutoencoderKLWan, in video pixels: tiles of
// MinHeight × MinWidth start every StrideHeight / StrideWidth pixels, so neighbours
// overlap by Min − Stride, where they are blended linearly. A frame is tiled only when it
// is larger than one tile.
type Tiling struct {
	MinHeight, MinWidth       int // tile_sample_min_height / _width
	StrideHeight, StrideWidth int // tile_sample_stride_height / _width
}

// DefaultTiling returns diffusers' defaults: 256-pixel tiles every 192 pixels.
func DefaultTiling() *Tiling {
	return &Tiling{MinHeight: 256, MinWidth: 256, StrideHeight: 192, StrideWidth: 192}
}

// String formats the tiling as "tile HxW stride HxW".
func (t *Tiling) String() string {
	return fmt.Sprintf("tile %dx%d stride %dx%d", t.MinHeight, t.MinWidth, t.StrideHeight, t.StrideWidth)
}

// check returns ErrTiling unless t works for cfg: positive sizes, multiples of the
// spatial factor, strides no larger than tiles, and the Wan 2.1 architecture (diffusers
// v0.35.2's tiled path skips the TI2V variant's patchify and first-chunk handling).
func (t *Tiling) check(cfg Config) error {
	r := cfg.SpatialFactor()
	if cfg.patch() > 1 || cfg.IsResidual {
		return fmt.Errorf("%w: the TI2V variant (patch_size %d, is_residual %v) cannot be tiled: diffusers v0.35.2's tiled encode/decode skip its patchify and first-chunk handling", ErrTiling, cfg.PatchSize, cfg.IsResidual)
	}
	for _, v := range []int{t.MinHeight, t.MinWidth, t.StrideHeight, t.StrideWidth} {
		if v <= 0 || v%r != 0 {
			return fmt.Errorf("%w: %v: every size must be a positive multiple of the spatial factor %d", ErrTiling, t, r)
		}
	}
	if t.StrideHeight > t.MinHeight || t.StrideWidth > t.MinWidth {
		return fmt.Errorf("%w: %v: a stride larger than its tile leaves gaps", ErrTiling, t)
	}
	return nil
}

// tileGrid returns the tile origins of an axis of size n: 0, stride, 2·stride, ... < n.
func tileGrid(n, stride int) []int {
	var o []int
	for i := 0; i < n; i += stride {
		o = append(o, i)
	}
	return o
}

// blendTiles assembles tiles[i][j] ([B, C, T, th, tw], modified in place) as diffusers'
// tiled_encode / tiled_decode do: in raster order each tile is blended with the (already
// blended) tile above over blendH rows and the one on its left over blendW columns, then
// cropped to strideH × strideW; the rows are joined and cropped to outH × outW.
func blendTiles(tiles [][]*tensor.Dense, blendH, blendW, strideH, strideW, outH, outW int) (*tensor.Dense, error) {
	var rows []*tensor.Dense
	for i, row := range tiles {
		var parts []*tensor.Dense
		for j, t := range row {
			if i > 0 {
				blendV(tiles[i-1][j], t, blendH)
			}
			if j > 0 {
				blendHz(row[j-1], t, blendW)
			}
			parts = append(parts, sliceBox(t, 0, t.Shape[2], 0, strideH, 0, strideW))
		}
		r, err := concatAxis(parts, 4)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	all, err := concatAxis(rows, 3)
	if err != nil {
		return nil, err
	}
	return sliceBox(all, 0, all.Shape[2], 0, outH, 0, outW), nil
}

// blendV is diffusers' blend_v: b's first e rows become a's last e rows ·(1 − y/e) plus
// b's ·(y/e), with e = min(a's rows, b's rows, extent); the weights are float32 as torch
// applies Python scalars to float32 tensors.
func blendV(a, b *tensor.Dense, extent int) {
	ha, hb, w := a.Shape[3], b.Shape[3], b.Shape[4]
	e := min(ha, hb, extent)
	planes := b.Shape[0] * b.Shape[1] * b.Shape[2]
	for y := range e {
		wa, wb := float32(1-float64(y)/float64(e)), float32(float64(y)/float64(e))
		for p := range planes {
			ra := a.Data[(p*ha+ha-e+y)*w:][:w]
			rb := b.Data[(p*hb+y)*w:][:w]
			for x := range w {
				rb[x] = ra[x]*wa + rb[x]*wb
			}
		}
	}
}

// blendHz is diffusers' blend_h: the same along the columns.
func blendHz(a, b *tensor.Dense, extent int) {
	wa, wb := a.Shape[4], b.Shape[4]
	e := min(wa, wb, extent)
	rows := b.Shape[0] * b.Shape[1] * b.Shape[2] * b.Shape[3]
	for x := range e {
		fa, fb := float32(1-float64(x)/float64(e)), float32(float64(x)/float64(e))
		for r := range rows {
			b.Data[r*wb+x] = a.Data[r*wa+wa-e+x]*fa + b.Data[r*wb+x]*fb
		}
	}
}
