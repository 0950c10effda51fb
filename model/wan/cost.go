package wan

import (
	"github.com/vdpp/vdpp/model/clip"
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
	// Condition is what the job's image conditioning encodes (zero: no image).
	Condition ConditionShape
}

// ConditionShape is what an image-conditioned job encodes before its steps
// (ImageEncoding.Encode): the video frames the VAE encoder runs on at the job's size (the
// whole video [image, zeros…(, last image)], or the image alone with expand_timesteps),
// the images (2 with a last image) and the image encoder's config (zero: none).
type ConditionShape struct {
	Frames int
	Images int
	CLIP   clip.Config
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
	// Encode is the image conditioning of one sample (0 without an image): the VAE
	// encode of the condition video chunk by chunk (the largest convolution of a chunk at
	// full resolution, with im2col patches where the backend gathers them, every causal
	// cache, the mid block's attention), the image encoder's largest layer, and what the
	// conditioning holds (the resized images, the condition latents and mask).
	Encode int64
}

// Peak is the larger of the step and the decode; the image conditioning (Encode) runs
// in the coordinator's prepare and is the family's ConditionActivationBytes.
func (m Memory) Peak() int64 { return max(m.Step, m.Decode) }

// EstimateMemory estimates the working memory of a job of shape s on a transformer tc and
// a VAE vc (the folder's real sizes). EstimateMemory is pure.
func EstimateMemory(tc transformer.Config, vc vae.Config, s MemoryShape) Memory {
	return Memory{Step: stepBytes(tc, s), Decode: decodeBytes(vc, s), Encode: encodeBytes(vc, s)}
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
	w := convWalk{simpleGo: s.SimpleGo, area: area}
	conv := w.conv
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
		w.area *= 4
		conv(out, next, t, 1, 3, out) // the 3x3 resample at the new size
	}
	patch := int64(max(vc.PatchSize, 1))
	video := int64(vc.OutChannels) * frames * w.area * patch * patch
	return heap(s, 4*(w.peak+w.caches+3*video))
}

// convWalk counts the live float32 elements of a causal VAE's convolutions, one chunk
// at a time: the largest convolution's and every causal cache's.
type convWalk struct {
	simpleGo     bool
	area         int64 // positions of a frame at the current level
	peak, caches int64
}

// conv counts a convolution of kernel kt in time and ks in space from cin to cout
// channels on t frames of the current area, inside a block whose input holds in·t·area.
func (w *convWalk) conv(cin, cout, t, kt, ks, in int64) {
	a := w.area
	x := cin * (t + kt - 1) * a // the input with its cached frames
	if kt > 1 {
		w.caches += 2 * cin * a
	}
	patches := int64(0)
	if w.simpleGo && ks > 1 {
		patches = im2colCopies * ks * ks * cin * t * a // one time tap's gathered patches
	} else if w.simpleGo && kt > 1 {
		patches = im2colCopies * kt * cin * t * a // a time-only kernel gathers its taps
	}
	// The block's norms and SiLU, the transposes to channels-last and back and the
	// spatial padding each copy the input or the output once.
	copies := 3 * (cin + cout) * t * a
	w.peak = max(w.peak, in*t*a+x+patches+copies+2*cout*t*a)
}

// encodeBytes is Memory.Encode.
func encodeBytes(vc vae.Config, s MemoryShape) int64 {
	c := s.Condition
	if c.Frames <= 0 {
		return 0
	}
	n := len(vc.DimMult)
	lf, h, wd := int64(s.Latent[0]), int64(s.Latent[2]), int64(s.Latent[3])
	patch := int64(max(vc.PatchSize, 1))
	full := h * wd << (2 * (n - 1)) // the encoder's input: patchified frames
	w := convWalk{simpleGo: s.SimpleGo, area: full}
	pixels := full * patch * patch
	// A later chunk's frames (the first has one): every level's time_conv halves them.
	t := int64(min(c.Frames, vae.EncodeChunkFrames))
	dims := []int64{int64(vc.BaseDim)}
	for _, m := range vc.DimMult {
		dims = append(dims, int64(vc.BaseDim*m))
	}
	in0 := int64(vc.InChannels)
	w.conv(in0, dims[0], t, 3, 3, in0)
	resnet := func(cin, cout int64) {
		w.conv(cin, cout, t, 3, 3, cin)
		w.conv(cout, cout, t, 3, 3, cin+cout)
	}
	for i := range n {
		in, out := dims[i], dims[i+1]
		for range vc.NumResBlocks {
			resnet(in, out)
			in = out
		}
		if i == n-1 {
			break
		}
		w.conv(out, out, t, 1, 3, out) // the stride-2 3x3 (counted at the input's size)
		w.area /= 4
		if i < len(vc.TemporalDownsample) && vc.TemporalDownsample[i] {
			w.conv(out, out, t, 3, 1, out) // time_conv, stride 2 in time
			t = max(1, t/2)
		}
	}
	top := dims[n]
	resnet(top, top)
	// The mid block's attention: one head over each frame's positions (the scores and
	// their exponentials), q, k, v and the output.
	attn := 2*t*w.area*w.area + 5*top*t*w.area
	resnet(top, top)
	z := int64(vc.ZDim)
	w.conv(top, 2*z, t, 3, 3, top)
	// Held while the chunks run: a chunk of the video, the resized images, and the
	// result: the posterior means, their concatenation and normalised copy, the mask.
	tf := int64(vc.TemporalFactor())
	held := in0*min(int64(c.Frames), vae.EncodeChunkFrames)*full + int64(max(c.Images, 1))*3*pixels + (3*z+tf)*lf*h*wd
	return heap(s, 4*(max(w.peak, attn)+w.caches+held)+c.CLIP.ForwardBytes(c.Images))
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
	sh := MemoryShape{Latent: [4]int(lat), Rows: rows, TextLen: text, ScoreBudget: budget, SimpleGo: s.simpleGo}
	switch s.Spec.Variant {
	case ImageToVideo:
		sh.Condition.Frames = s.VConfig.VideoFrames(lat[0])
	case TextImageToVideo:
		sh.Condition.Frames = 1 // the image alone
	}
	if sh.Condition.Frames > 0 {
		sh.Condition.Images = 1
		if s.Spec.LastImage != family.NeedNone {
			sh.Condition.Images = 2
		}
		if s.Spec.Encoder {
			sh.Condition.CLIP = s.Spec.CLIP
		}
	}
	return sh
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

// ConditionActivationBytes implements family.ConditionEstimator: the image conditioning's
// working memory (Memory.Encode; 0 for a text-to-video folder).
func (s *Sampler) ConditionActivationBytes(p family.Params) int64 { return s.Memory(p).Encode }

var (
	_ family.ActivationEstimator = (*Sampler)(nil)
	_ family.ConditionEstimator  = (*Sampler)(nil)
)
