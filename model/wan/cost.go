package wan

import (
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/umt5"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
)

// MemoryShape is what a job's working memory depends on besides the configs: the latent
// [T, C, h, w] of one sample, the transformer rows of a step (2 under CFG), the text
// length of the conditioning, and the backend's attention score budget
// (nn.AttentionChunkFor: the most bytes one block of attention scores may take) and
// whether it is GoMLX's pure-Go backend (simplego), whose convolutions lower to im2col and
// whose buffers live on the Go heap.
type MemoryShape struct {
	Latent      [4]int
	Rows        int
	TextLen     int
	ScoreBudget int64
	SimpleGo    bool
}

// goHeapFactor is the resident memory of a live set on the Go heap: the collector lets
// the heap grow to twice the live set (GOGC=100) before it collects, and simplego's
// buffers (every intermediate tensor, pooled by size) are on that heap.
const goHeapFactor = 2

// im2colCopies is how many copies of a convolution's gathered patches simplego holds at
// once: the kh·kw shifted slices, their concatenation and the matrix product's blocked
// copy of its operand, and one more because simplego runs independent operations (the
// causal convolution's time taps) at the same time. It is checked against measured peak
// RSS in docs/serve.md.
const im2colCopies = 4

// Memory is the estimated float32 working bytes of one Wan job's two heavy stages, resident
// bytes on simplego (see goHeapFactor); the weights are not included.
type Memory struct {
	// Step is one transformer call on every row: the largest of a block's self-attention,
	// cross-attention and feed-forward live tensors (the residual stream, norms, q/k/v and
	// their rotated copies, two blocks of scores, the attention output and its
	// concatenation; the FFN's hidden activations), times the rows, plus the step's
	// latents.
	Step int64
	// Decode is the causal VAE decode of one sample: the largest convolution of a latent
	// frame's chunk (its input with the two cached frames, im2col patches where the
	// backend gathers them, output and accumulator, the block's input) plus every causal
	// cache, plus three copies of the decoded video (the chunks, their concatenation and
	// the frame-major copy).
	Decode int64
}

// Peak is the larger of the two stages.
func (m Memory) Peak() int64 { return max(m.Step, m.Decode) }

// EstimateMemory estimates the working memory of a job of shape s on a transformer tc and
// a VAE vc (the folder's real sizes). EstimateMemory is pure.
func EstimateMemory(tc transformer.Config, vc vae.Config, s MemoryShape) Memory {
	return Memory{Step: stepBytes(tc, s), Decode: decodeBytes(vc, s)}
}

// stepBytes is Memory.Step.
func stepBytes(tc transformer.Config, s MemoryShape) int64 {
	t, c, h, w := int64(s.Latent[0]), int64(s.Latent[1]), int64(s.Latent[2]), int64(s.Latent[3])
	p := tc.PatchSize
	tokens := max(t/int64(p[0]), 1) * max(h/int64(p[1]), 1) * max(w/int64(p[2]), 1)
	d, f, heads := int64(tc.InnerDim()), int64(tc.FFNDim), int64(tc.NumAttentionHeads)
	text := int64(max(s.TextLen, 1))
	// scores is two blocks of [heads, chunk, keys] as attend blocks queries (the scores
	// and their exponentials).
	scores := func(keys int64) int64 {
		full := heads * tokens * keys
		if s.ScoreBudget > 0 {
			full = min(full, max(s.ScoreBudget/4, heads*keys))
		}
		return 2 * full
	}
	// The rotary tables: cos and sin per token and head dim.
	rope := 2 * tokens * int64(tc.AttentionHeadDim)
	self := 9*tokens*d + scores(tokens) + rope
	cross := 5*tokens*d + 2*text*d + scores(text)
	ffn := 3*tokens*d + 3*tokens*f
	block := max(self, cross, ffn)
	rows := int64(max(s.Rows, 1))
	// The step's latents: input, prediction per row, CFG combination and the update.
	latents := 6 * rows * t * c * h * w
	return heap(s, 4*(rows*block+latents))
}

// decodeBytes is Memory.Decode.
func decodeBytes(vc vae.Config, s MemoryShape) int64 {
	frames := int64(vc.VideoFrames(max(s.Latent[0], 1)))
	area := int64(s.Latent[2]) * int64(s.Latent[3]) // per frame at the current level
	dims := decoderDims(vc)
	up := temporalUpsample(vc)
	var peak, caches int64
	// conv counts a convolution of kernel k (in time and space) from cin to cout channels
	// on t frames of area positions, inside a block whose input holds in·t·area.
	conv := func(cin, cout, t, kt, ks, in int64) {
		a := area
		x := cin * (t + kt - 1) * a // the input with its cached frames
		if kt > 1 {
			caches += 2 * cin * a
		}
		patches := int64(0)
		if s.SimpleGo && ks > 1 {
			patches = im2colCopies * ks * ks * cin * t * a // one time tap's gathered patches
		} else if s.SimpleGo && kt > 1 {
			patches = im2colCopies * kt * cin * t * a // a time-only kernel gathers its taps
		}
		// The block's norms and SiLU, the transposes to channels-last and back and the
		// spatial padding each copy the input or the output once.
		copies := 3 * (cin + cout) * t * a
		peak = max(peak, in*t*a+x+patches+copies+2*cout*t*a)
	}
	z := int64(vc.ZDim)
	t := int64(1) // frames of a chunk at this level (a later chunk; the first has one)
	conv(z, z, t, 1, 1, z)
	conv(z, int64(dims[0]), t, 3, 3, z)
	resnet := func(cin, cout int64) {
		conv(cin, cout, t, 3, 3, cin)
		conv(cout, cout, t, 3, 3, cin+cout)
	}
	resnet(int64(dims[0]), int64(dims[0]))
	resnet(int64(dims[0]), int64(dims[0]))
	n := len(vc.DimMult)
	for i := range n {
		in, out := int64(dims[i]), int64(dims[i+1])
		if i > 0 && !vc.IsResidual {
			in /= 2 // the Wan 2.1 upsamplers halve the channels
		}
		for range vc.NumResBlocks + 1 {
			resnet(in, out)
			in = out
		}
		if i == n-1 {
			break
		}
		next := out / 2
		if vc.IsResidual {
			next = out
		}
		if up[i] {
			conv(out, 2*out, t, 3, 1, out) // time_conv: twice the frames
			t *= 2
		}
		area *= 4
		conv(out, next, t, 1, 3, out) // the 3x3 resample at the new size
	}
	patch := int64(max(vc.PatchSize, 1))
	video := int64(vc.OutChannels) * frames * area * patch * patch
	return heap(s, 4*(peak+caches+3*video))
}

// heap is the resident bytes of live bytes on s's backend.
func heap(s MemoryShape, live int64) int64 {
	if s.SimpleGo {
		return goHeapFactor * live
	}
	return live
}

// decoderDims mirrors vae's WanDecoder3d dims: decoder_base·[dim_mult[-1], reversed dim_mult...].
func decoderDims(c vae.Config) []int {
	n := len(c.DimMult)
	base := c.DecoderBaseDim
	if base == 0 {
		base = c.BaseDim
	}
	d := []int{base * c.DimMult[n-1]}
	for i := n - 1; i >= 0; i-- {
		d = append(d, base*c.DimMult[i])
	}
	return d
}

// temporalUpsample is temperal_downsample reversed (the decoder's per-level flags).
func temporalUpsample(c vae.Config) []bool {
	n := len(c.TemporalDownsample)
	u := make([]bool, n)
	for i, v := range c.TemporalDownsample {
		u[n-1-i] = v
	}
	return u
}

// memoryShape is the MemoryShape of a job with p on this sampler's backend.
func (s *Sampler) memoryShape(p family.Params) MemoryShape {
	lat := s.LatentShape(p)
	rows := 1
	if Guided(p) {
		rows = 2
	}
	text := umt5.DefaultMaxSequenceLength
	if s.Text != nil {
		text = s.Text.MaxLen
	}
	budget := nn.XLAScoreBudget
	if s.simpleGo {
		budget = nn.SimpleGoScoreBudget
	}
	return MemoryShape{Latent: [4]int(lat), Rows: rows, TextLen: text, ScoreBudget: budget, SimpleGo: s.simpleGo}
}

// Memory estimates the working memory of a job with p on this folder's configs: a long
// video's step on one window (family.Params.StepParams), its decode on the whole video.
func (s *Sampler) Memory(p family.Params) Memory {
	m := EstimateMemory(s.TConfig, s.VConfig, s.memoryShape(p))
	if w := p.StepParams(); w.NumFrames != p.NumFrames {
		m.Step = EstimateMemory(s.TConfig, s.VConfig, s.memoryShape(w)).Step
	}
	return m
}

// StepActivationBytes implements family.ActivationEstimator: the larger of a step's and
// the decode's working memory (Memory.Peak), so a job whose decode outgrows its steps (a
// long video on a small transformer) is bounded too.
func (s *Sampler) StepActivationBytes(p family.Params) int64 { return s.Memory(p).Peak() }

var _ family.ActivationEstimator = (*Sampler)(nil)
