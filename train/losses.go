package train

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
)

// KL weight of the VAE loss (on the per-element mean KL).
const klWeight = 1e-5

// splitAxis1 returns the two halves of x [N, 2C, ...] along axis 1 with a 0/1 mask and a
// sum (no Slice node, so its gradient runs on simplego); the values are exact.
func splitAxis1(x *Node) (a, b *Node) {
	d := x.Shape().Dimensions
	c := d[1] / 2
	shape := append([]int{d[0], 2, c}, d[2:]...)
	xp := Reshape(x, shape...)
	pick := func(i int) *Node {
		m := []float32{0, 0}
		m[i] = 1
		ms := make([]int, len(shape))
		for j := range ms {
			ms[j] = 1
		}
		ms[1] = 2
		return ReduceSum(Mul(xp, Reshape(Const(x.Graph(), m), ms...)), 1)
	}
	return pick(0), pick(1)
}

// vaeLoss builds the VAE training loss on clips [N·frames, 3, H, W] in [-1, 1] and unit
// Gaussian noise eps [N·frames, latent, h, w] (the reparameterisation draw): every frame is
// encoded, z = mean + std·eps is decoded by the temporal decoder with num_frames = frames,
// and the loss is mean|x̂ − x| + mean (x̂ − x)² + klWeight · mean KL(q ‖ N(0, 1)). It also
// returns the MSE alone.
func vaeLoss(s nn.Scope, cfg vae.Config, x, eps *Node, frames int) (loss, mse *Node) {
	g := x.Graph()
	moments := vae.BuildEncoderMoments(s, x, cfg)
	mean, logvar := splitAxis1(moments)
	logvar = Min(Max(logvar, Scalar(g, logvar.DType(), -30)), Scalar(g, logvar.DType(), 20))
	std := Exp(MulScalar(logvar, 0.5))
	z := Add(mean, Mul(std, eps))
	rec := vae.BuildDecoder(s, z, frames, cfg)
	diff := Sub(rec, x)
	mse = ReduceAllMean(Square(diff))
	l1 := ReduceAllMean(Abs(diff))
	kl := MulScalar(ReduceAllMean(Sub(Add(Square(mean), Exp(logvar)), OnePlus(logvar))), 0.5)
	return Add(Add(l1, mse), MulScalar(kl, klWeight)), mse
}

// unetLoss builds SVD's EDM v-prediction loss for a batch: x0 [B, T, C, h, w] (VAE latents
// times the scaling factor), noise [B, T, C, h, w] ~ N(0, 1), sigma [B], imageLatents
// [B, C, h, w] (the unscaled VAE mode of the noise-augmented first frame, zero for dropped
// rows), ehs [B, 1, D] (the CLIP embedding, zero for dropped rows), ids [B, 3]. With
// x = x0 + σ·noise the network sees [x/√(σ²+1), image latents] and timestep 0.25·ln σ and
// its output F is compared with the target (x0 − x/(σ²+1)) / (−σ/√(σ²+1)), so that
// c_skip·x + c_out·F = x0 exactly when F is the target (sched's v-prediction step).
func unetLoss(s nn.Scope, cfg unet.Config, x0, noise, sigma, imageLatents, ehs, ids *Node) *Node {
	d := x0.Shape().Dimensions
	b, t := d[0], d[1]
	sg := Reshape(sigma, b, 1, 1, 1, 1)
	s2p1 := OnePlus(Square(sg))
	x := Add(x0, Mul(sg, noise))
	cin := Div(x, Sqrt(s2p1))
	cond := BroadcastToDims(InsertAxes(imageLatents, 1), b, t, d[2], d[3], d[4])
	in := Concatenate([]*Node{cin, cond}, 2)
	ts := MulScalar(Log(sigma), 0.25)
	out := unet.Build(s, cfg, in, ts, ehs, ids)
	cout := Neg(Div(sg, Sqrt(s2p1)))
	target := Div(Sub(x0, Div(x, s2p1)), cout)
	return ReduceAllMean(Square(Sub(out, target)))
}
