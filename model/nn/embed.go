package nn

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// TimestepFreqs returns the dim/2 frequencies of diffusers' get_timestep_embedding,
// exp(−ln(10000)·j/(dim/2 − downscaleFreqShift)) for j = 0..dim/2−1, evaluated with
// torch's float32 steps (exponent rounded to float32 before exp).
func TimestepFreqs(dim int, downscaleFreqShift float64) []float32 {
	half := dim / 2
	f := make([]float32, half)
	lnMax := float32(-math.Log(10000))
	den := float32(float64(half) - downscaleFreqShift)
	for j := range f {
		e := lnMax * float32(j) / den
		f[j] = float32(math.Exp(float64(e)))
	}
	return f
}

// Timesteps is diffusers' Timesteps / get_timestep_embedding for t [B] (or a scalar, taken
// as [1]): arg = t·f_j, emb = [sin(arg), cos(arg)] ([cos, sin] when flipSinToCos), zero
// padded to dim when dim is odd. The result is [B, dim].
func Timesteps(t *Node, dim int, flipSinToCos bool, downscaleFreqShift float64) *Node {
	if dim < 2 {
		panic(fmt.Errorf("nn: Timesteps: dim %d < 2", dim))
	}
	if t.Rank() == 0 {
		t = Reshape(t, 1)
	}
	if t.Rank() != 1 {
		panic(fmt.Errorf("nn: Timesteps: t %v must be [B] or a scalar", t.Shape()))
	}
	freqs := Const(t.Graph(), TimestepFreqs(dim, downscaleFreqShift))
	arg := Mul(InsertAxes(t, -1), InsertAxes(freqs, 0)) // [B, half]
	sin, cos := Sin(arg), Cos(arg)
	var emb *Node
	if flipSinToCos {
		emb = Concatenate([]*Node{cos, sin}, -1)
	} else {
		emb = Concatenate([]*Node{sin, cos}, -1)
	}
	if dim%2 == 1 {
		emb = padAxis(emb, 1, 0, 1)
	}
	return emb
}

// UpsampleNearest2x doubles H and W of x [N, C, H, W] by repeating each pixel 2×2, like
// torch.nn.functional.interpolate(scale_factor=2, mode="nearest").
func UpsampleNearest2x(x *Node) *Node {
	if x.Rank() != 4 {
		panic(fmt.Errorf("nn: UpsampleNearest2x: input %v is not [N, C, H, W]", x.Shape()))
	}
	d := x.Shape().Dimensions
	n, c, h, w := d[0], d[1], d[2], d[3]
	y := BroadcastToDims(Reshape(x, n, c, h, 1, w, 1), n, c, h, 2, w, 2)
	return Reshape(y, n, c, 2*h, 2*w)
}
