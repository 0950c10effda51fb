package vae

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/tensor"
)

// DefaultTileOverlap is the fraction of a tile shared with each neighbour, diffusers'
// tile_overlap_factor.
const DefaultTileOverlap = 0.25

// Tiling makes Decode and Encode work on overlapping spatial tiles, as diffusers'
// AutoencoderKL does after enable_tiling (tiled_decode, _tiled_encode; its
// AutoencoderKLTemporalDecoder has no tiling of its own): a tile's activations are all
// that is live, so memory scales with the tile, not the frame. Tiles start every
// Sample·(1−Overlap) pixels (in the side being cut: latent pixels for decode, image pixels
// for encode) and are cut at the far edge; each is blended into the one above and the one
// to its left over Overlap of a tile with a linear ramp (blend_v, blend_h, in that order,
// row by row, each tile already blended when its neighbours read it) and cropped to
// Sample·(1−Overlap). The temporal decoder sees all of a chunk's frames in every tile.
// The result differs from the untiled decode where the tiles meet (no reference tiles it).
type Tiling struct {
	// Sample is the tile side in image pixels (diffusers' tile_sample_min_size, the
	// config's sample_size by default); a latent tile is Sample / the VAE's factor.
	// 0 turns tiling off.
	Sample int
	// Overlap is the fraction of a tile blended with a neighbour (DefaultTileOverlap).
	Overlap float64
}

// Factor is the VAE's spatial factor: image pixels per latent pixel.
func (m *Model) Factor() int { return 1 << (len(m.cfg.BlockOutChannels) - 1) }

// WithTiling returns the model decoding and encoding in tiles t (sharing m's weights and
// programs; m is unchanged). t.Sample must be a positive multiple of Factor and t.Overlap
// in [0, 1); t.Sample 0 returns the model untiled.
func (m *Model) WithTiling(t Tiling) (*Model, error) {
	if err := t.Check(m.Factor()); err != nil {
		return nil, err
	}
	c := *m
	c.tiling = t
	return &c, nil
}

// Check reports a tiling a VAE of spatial factor f cannot run (one line naming it): see
// WithTiling.
func (t Tiling) Check(f int) error {
	switch {
	case t.Sample == 0:
	case t.Sample < 0 || t.Sample%f != 0:
		return fmt.Errorf("%w: tile of %d pixels is not a positive multiple of the VAE's factor %d", ErrInput, t.Sample, f)
	case !(t.Overlap >= 0 && t.Overlap < 1):
		return fmt.Errorf("%w: tile overlap %v is not in [0, 1)", ErrInput, t.Overlap)
	case int(float64(t.Sample/f)*(1-t.Overlap)) < 1:
		return fmt.Errorf("%w: tile of %d pixels with overlap %v leaves no stride", ErrInput, t.Sample, t.Overlap)
	case int(float64(t.Sample/f)*(1-t.Overlap))*f != t.Sample-int(float64(t.Sample)*t.Overlap):
		// diffusers' arithmetic would then crop tiles to more pixels than they advance,
		// and the frames would come out larger than asked.
		return fmt.Errorf("%w: tile of %d pixels with overlap %v: the stride is not whole latent pixels (with overlap 0.25, use a multiple of %d)", ErrInput, t.Sample, t.Overlap, 4*f)
	}
	return nil
}

// runDecode decodes one chunk of latents [F, C, h, w], in tiles when tiling is on and the
// latents are larger than a tile (diffusers tiles only then).
func (m *Model) runDecode(z *tensor.Dense) (*tensor.Dense, error) {
	lt := m.tiling.Sample / m.Factor()
	if m.tiling.Sample == 0 || (z.Shape[2] <= lt && z.Shape[3] <= lt) {
		out, err := m.dec.Run(z)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	return tiled(z, lt, m.tiling.Sample, m.tiling.Overlap, func(tile *tensor.Dense) (*tensor.Dense, error) {
		out, err := m.dec.Run(tile)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	})
}

// tiled runs f on overlapping tiles of x [N, C, H, W] and blends the results as diffusers'
// tiled_decode / _tiled_encode do: in tiles of inTile (stride ⌊inTile·(1−overlap)⌋), out
// tiles of outTile blended over ⌊outTile·overlap⌋ and cropped to outTile minus that.
func tiled(x *tensor.Dense, inTile, outTile int, overlap float64, f func(*tensor.Dense) (*tensor.Dense, error)) (*tensor.Dense, error) {
	h, w := x.Shape[2], x.Shape[3]
	stride := int(float64(inTile) * (1 - overlap))
	blend := int(float64(outTile) * overlap)
	limit := outTile - blend
	var rows [][]*tensor.Dense
	for i := 0; i < h; i += stride {
		var row []*tensor.Dense
		for j := 0; j < w; j += stride {
			out, err := f(cropHW(x, i, min(i+inTile, h), j, min(j+inTile, w)))
			if err != nil {
				return nil, fmt.Errorf("tile at (%d, %d): %w", i, j, err)
			}
			row = append(row, out)
		}
		rows = append(rows, row)
	}
	var parts [][]*tensor.Dense
	for i, row := range rows {
		var part []*tensor.Dense
		for j, t := range row {
			if i > 0 {
				blendV(rows[i-1][j], t, blend)
			}
			if j > 0 {
				blendH(row[j-1], t, blend)
			}
			part = append(part, cropHW(t, 0, min(limit, t.Shape[2]), 0, min(limit, t.Shape[3])))
		}
		parts = append(parts, part)
	}
	return joinHW(parts), nil
}

// cropHW copies rows [y0, y1) and columns [x0, x1) of every plane of t [N, C, H, W].
func cropHW(t *tensor.Dense, y0, y1, x0, x1 int) *tensor.Dense {
	n, c, h, w := t.Shape[0], t.Shape[1], t.Shape[2], t.Shape[3]
	out := tensor.New(n, c, y1-y0, x1-x0)
	k := 0
	for p := 0; p < n*c; p++ {
		for y := y0; y < y1; y++ {
			k += copy(out.Data[k:], t.Data[(p*h+y)*w+x0:(p*h+y)*w+x1])
		}
	}
	return out
}

// blendV is diffusers' blend_v, in place on b: b's first e rows (e = min of both heights
// and extent) become a's last e rows ·(1 − y/e) + b's ·(y/e), each product rounded to
// float32 as torch does with a Python scalar.
func blendV(a, b *tensor.Dense, extent int) {
	e := min(a.Shape[2], b.Shape[2], extent)
	planes, ha, hb, w := a.Shape[0]*a.Shape[1], a.Shape[2], b.Shape[2], b.Shape[3]
	for y := 0; y < e; y++ {
		wa, wb := float32(1-float64(y)/float64(e)), float32(float64(y)/float64(e))
		for p := 0; p < planes; p++ {
			ra := a.Data[(p*ha+ha-e+y)*a.Shape[3]:]
			rb := b.Data[(p*hb+y)*w:]
			for x := 0; x < w; x++ {
				rb[x] = float32(ra[x]*wa) + float32(rb[x]*wb)
			}
		}
	}
}

// blendH is diffusers' blend_h, in place on b: b's first e columns from a's last e.
func blendH(a, b *tensor.Dense, extent int) {
	e := min(a.Shape[3], b.Shape[3], extent)
	planes, h, wa, wb := a.Shape[0]*a.Shape[1], b.Shape[2], a.Shape[3], b.Shape[3]
	for x := 0; x < e; x++ {
		ka, kb := float32(1-float64(x)/float64(e)), float32(float64(x)/float64(e))
		for p := 0; p < planes; p++ {
			for y := 0; y < h; y++ {
				i := (p*h+y)*wb + x
				b.Data[i] = float32(a.Data[(p*a.Shape[2]+y)*wa+wa-e+x]*ka) + float32(b.Data[i]*kb)
			}
		}
	}
}

// joinHW concatenates tiles [N, C, h_ij, w_ij] into [N, C, Σh, Σw]: each row of tiles along
// the width, the rows along the height.
func joinHW(parts [][]*tensor.Dense) *tensor.Dense {
	n, c := parts[0][0].Shape[0], parts[0][0].Shape[1]
	var H, W int
	for _, row := range parts {
		H += row[0].Shape[2]
	}
	for _, t := range parts[0] {
		W += t.Shape[3]
	}
	out := tensor.New(n, c, H, W)
	y0 := 0
	for _, row := range parts {
		x0 := 0
		for _, t := range row {
			h, w := t.Shape[2], t.Shape[3]
			for p := 0; p < n*c; p++ {
				for y := 0; y < h; y++ {
					copy(out.Data[(p*H+y0+y)*W+x0:], t.Data[(p*h+y)*w:(p*h+y+1)*w])
				}
			}
			x0 += w
		}
		y0 += row[0].Shape[2]
	}
	return out
}

// encodeTiled is diffusers' _tiled_encode: the moments (quant_conv's output) of image
// tiles blended, then the posterior of the blended moments as DiagonalGaussianDistribution
// makes it (logvar clamped to [-30, 20], std = exp(logvar/2)).
func (m *Model) encodeTiled(image *tensor.Dense) (Posterior, error) {
	t := m.tiling
	moments, err := tiled(image, t.Sample, t.Sample/m.Factor(), t.Overlap, func(tile *tensor.Dense) (*tensor.Dense, error) {
		out, err := m.enc.Run(tile)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	})
	if err != nil {
		return Posterior{}, err
	}
	lc := m.cfg.LatentChannels
	n, h, w := moments.Shape[0], moments.Shape[2], moments.Shape[3]
	p := Posterior{Moments: moments, Mean: tensor.New(n, lc, h, w), LogVar: tensor.New(n, lc, h, w), Std: tensor.New(n, lc, h, w)}
	plane := lc * h * w
	for i := 0; i < n; i++ {
		copy(p.Mean.Data[i*plane:(i+1)*plane], moments.Data[2*i*plane:])
		for k, v := range moments.Data[(2*i+1)*plane : (2*i+2)*plane] {
			lv := min(max(v, logvarMin), logvarMax)
			p.LogVar.Data[i*plane+k] = lv
			p.Std.Data[i*plane+k] = float32(math.Exp(float64(lv * 0.5)))
		}
	}
	return p, nil
}
