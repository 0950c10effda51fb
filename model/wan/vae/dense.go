package vae

import (
	"fmt"

	"github.com/vdpp/vdpp/tensor"
)

// Host-side helpers on [B, C, T, H, W] tensors.

// sliceBox returns t[:, :, t0:t1, h0:h1, w0:w1] as a new tensor (ends clipped to t's size).
func sliceBox(t *tensor.Dense, t0, t1, h0, h1, w0, w1 int) *tensor.Dense {
	d := t.Shape
	t1, h1, w1 = min(t1, d[2]), min(h1, d[3]), min(w1, d[4])
	out := tensor.New(d[0], d[1], t1-t0, h1-h0, w1-w0)
	o := 0
	for bc := range d[0] * d[1] {
		for f := t0; f < t1; f++ {
			for y := h0; y < h1; y++ {
				base := ((bc*d[2]+f)*d[3] + y) * d[4]
				o += copy(out.Data[o:], t.Data[base+w0:base+w1])
			}
		}
	}
	return out
}

// sliceTime returns t[:, :, t0:t1].
func sliceTime(t *tensor.Dense, t0, t1 int) *tensor.Dense {
	return sliceBox(t, t0, t1, 0, t.Shape[3], 0, t.Shape[4])
}

// concatAxis joins [B, C, T, H, W] tensors along axis (2, 3 or 4); the other axes must
// agree.
func concatAxis(parts []*tensor.Dense, axis int) (*tensor.Dense, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("wan/vae: concat of no tensors")
	}
	shape := append([]int(nil), parts[0].Shape...)
	shape[axis] = 0
	for i, p := range parts {
		for a := range 5 {
			if a != axis && p.Shape[a] != parts[0].Shape[a] {
				return nil, fmt.Errorf("wan/vae: concat on axis %d: part %d is %v, part 0 is %v", axis, i, p.Shape, parts[0].Shape)
			}
		}
		shape[axis] += p.Shape[axis]
	}
	out := tensor.New(shape...)
	outer := 1
	for a := range axis {
		outer *= shape[a]
	}
	inner := tensor.NumElements(shape[axis+1:])
	o := 0
	for r := range outer {
		for _, p := range parts {
			n := p.Shape[axis] * inner
			o += copy(out.Data[o:], p.Data[r*n:(r+1)*n])
		}
	}
	return out, nil
}

// clampUnit clamps every value to [-1, 1] in place (NaN stays NaN, as torch.clamp).
func clampUnit(t *tensor.Dense) {
	for i, v := range t.Data {
		if v < -1 {
			t.Data[i] = -1
		} else if v > 1 {
			t.Data[i] = 1
		}
	}
}
