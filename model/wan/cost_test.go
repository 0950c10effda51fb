package wan

import (
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
)

// TestEstimateMemory checks the estimate's rules on real Wan 2.1 sizes (the 14B
// transformer: 40 heads x 128, FFN 13824; the VAE: z 16, base 96): it grows with every
// dimension, guidance doubles the step's rows, the attention scores stop growing at the
// backend's budget, simplego's Go heap doubles the resident bytes, and Peak is the larger
// stage.
func TestEstimateMemory(t *testing.T) {
	tc := transformer.Config{PatchSize: [3]int{1, 2, 2}, NumAttentionHeads: 40, AttentionHeadDim: 128, InChannels: 16,
		OutChannels: 16, TextDim: 4096, FreqDim: 256, FFNDim: 13824, NumLayers: 40, RopeMaxSeqLen: 1024, Eps: 1e-6}
	vc := vae.Config{BaseDim: 96, DecoderBaseDim: 96, ZDim: 16, DimMult: []int{1, 2, 4, 4}, NumResBlocks: 2,
		TemporalDownsample: []bool{false, true, true}, OutChannels: 3}
	native := MemoryShape{Latent: [4]int{21, 16, 60, 104}, Rows: 2, TextLen: 512, ScoreBudget: 4 << 30}
	m := EstimateMemory(tc, vc, native)
	if m.Step <= 0 || m.Decode <= 0 || m.Peak() != max(m.Step, m.Decode) {
		t.Fatalf("native: %+v", m)
	}
	// 32760 tokens x 5120 wide: the residual stream alone is 671 MB a row.
	if tokens := int64(21 * 30 * 52); m.Step < 2*4*tokens*5120 {
		t.Errorf("step %d B is less than the two rows' residual streams", m.Step)
	}
	grow := func(name string, s MemoryShape) {
		t.Helper()
		g := EstimateMemory(tc, vc, s)
		if g.Step < m.Step || g.Decode < m.Decode || g.Peak() <= m.Peak() {
			t.Errorf("%s: %+v does not grow from %+v", name, g, m)
		}
	}
	more := native
	more.Latent[0] = 41
	grow("frames", more)
	more = native
	more.Latent[2], more.Latent[3] = 120, 208
	grow("size", more)
	one := native
	one.Rows = 1
	if g := EstimateMemory(tc, vc, one); g.Step >= m.Step || g.Decode != m.Decode {
		t.Errorf("one row: %+v, two rows: %+v", g, m)
	}
	small := native
	small.ScoreBudget = 256 << 20
	if g := EstimateMemory(tc, vc, small); g.Step >= m.Step {
		t.Errorf("a 256 MB score budget: %+v, 4 GB: %+v", g, m)
	}
	sg := small
	sg.SimpleGo = true
	if g, x := EstimateMemory(tc, vc, sg), EstimateMemory(tc, vc, small); g.Step != goHeapFactor*x.Step || g.Decode <= goHeapFactor*x.Decode {
		t.Errorf("simplego %+v, xla %+v", g, x)
	}
}

// TestSamplerMemory: the sampler estimates from its folder's configs on its latent (4x
// temporal and 8x spatial compression: 81 frames of 832x480 -> 21 x 60 x 104), and CFG
// (guidance_scale > 1) counts two rows.
func TestSamplerMemory(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	s, err := Load(dir, family.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := s.DefaultParams()
	sh := s.memoryShape(p)
	if sh.Latent != [4]int{21, 4, 60, 104} || sh.Rows != 2 || sh.TextLen != 512 {
		t.Fatalf("memory shape %+v", sh)
	}
	if got, want := s.StepActivationBytes(p), EstimateMemory(s.TConfig, s.VConfig, sh).Peak(); got != want || got <= 0 {
		t.Fatalf("StepActivationBytes %d, want %d", got, want)
	}
	p.GuidanceScale = 1
	if sh := s.memoryShape(p); sh.Rows != 1 {
		t.Fatalf("unguided rows %d", sh.Rows)
	}
}

// A long video's step is one window's, its decode the whole video's.
func TestSamplerMemoryWindows(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	s, err := Load(dir, family.Options{})
	if err != nil {
		t.Fatal(err)
	}
	native, long := s.DefaultParams(), s.DefaultParams()
	long.NumFrames, long.Window, long.Overlap = 321, 81, 20
	whole := long
	whole.Window = 0
	m, mn, mw := s.Memory(long), s.Memory(native), s.Memory(whole)
	if m.Step != mn.Step || m.Decode != mw.Decode || m.Decode <= mn.Decode || mw.Step <= m.Step {
		t.Fatalf("321 frames in windows of 81: %+v; native %+v, without windows %+v", m, mn, mw)
	}
}
