package train

import (
	stdcontext "context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/nn"
)

// TestOwnSpansCoverTheTree: for every microbatch count and rank count that divides it, the
// ranks' spans cover every microbatch once, and finishing the tree from them gives the bits
// of the whole tree evaluated in one place, on values where the order of the additions
// changes the float32 result.
func TestOwnSpansCoverTheTree(t *testing.T) {
	leafValue := func(i int) []float32 {
		return []float32{float32(math.Pow(-3, float64(i%7))) * 1e7 / float32(i+1), 1 / float32(i+3), float32(i)}
	}
	for m := 1; m <= 12; m++ {
		whole, err := sumSpan(span{0, m}, func(i int) ([]float32, error) { return leafValue(i), nil })
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= m; n++ {
			if m%n != 0 {
				continue
			}
			known := map[span][]float32{}
			covered := make([]int, m)
			for r := 0; r < n; r++ {
				for _, s := range ownSpans(r*m/n, (r+1)*m/n, m) {
					for i := s.lo; i < s.hi; i++ {
						covered[i]++
					}
					v, err := sumSpan(s, func(i int) ([]float32, error) { return leafValue(i), nil })
					if err != nil {
						t.Fatal(err)
					}
					known[s] = v
				}
			}
			for i, c := range covered {
				if c != 1 {
					t.Fatalf("m=%d n=%d: microbatch %d covered %d times", m, n, i, c)
				}
			}
			got, err := sumTree(m, known)
			if err != nil {
				t.Fatal(err)
			}
			for i := range whole {
				if math.Float32bits(got[i]) != math.Float32bits(whole[i]) {
					t.Fatalf("m=%d n=%d: element %d is %v, the whole tree gives %v", m, n, i, got[i], whole[i])
				}
			}
		}
	}
	if _, err := sumTree(4, map[span][]float32{{0, 2}: {1}}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a tree with microbatches [2, 4) missing: %v, want an error saying so", err)
	}
}

// dpOptions are the options of a tiny VAE run of batch 4 for the equivalence tests.
func dpOptions(dir string, steps, micro int, cfg *Configs) Options {
	o := DefaultOptions()
	o.Dir, o.Steps, o.Configs = dir, steps, cfg
	o.VAEFrames, o.VAECrop, o.CheckpointEvery, o.Train = 2, 8, 0, 8
	o.Batch, o.MicroBatch, o.CheckEvery = 4, micro, 5
	o.EMA = 0.9
	return o
}

// runWorld runs o on size in-process ranks (one goroutine and one backend each) and returns
// rank 0's result and every rank's error.
func runWorld(t *testing.T, size int, o Options) (Result, []error) {
	t.Helper()
	return runWorldEach(t, size, func(int) Options { return o })
}

// runWorldEach is runWorld with the options of each rank.
func runWorldEach(t *testing.T, size int, options func(rank int) Options) (Result, []error) {
	t.Helper()
	trs := comm.NewLocal(size, comm.Options{RecvTimeout: time.Minute})
	results := make([]Result, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer trs[r].Close()
			g, err := comm.NewNamedGroup(trs[r], "train", seq(size))
			if err != nil {
				errs[r] = err
				return
			}
			b, err := nn.NewBackend("go")
			if err != nil {
				errs[r] = err
				return
			}
			results[r], errs[r] = RunRank(stdcontext.Background(), b, options(r), GroupPeers(trs[r], g))
		}()
	}
	wg.Wait()
	return results[0], errs
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// requireSameState fails unless the checkpoints of a phase in two run folders hold the same
// variables (weights, EMA, Adam moments, counters), bit for bit.
func requireSameState(t *testing.T, what, a, b, phase string) {
	t.Helper()
	ca, _, err := loadContext(StatePath(a, phase))
	if err != nil {
		t.Fatal(err)
	}
	cb, _, err := loadContext(StatePath(b, phase))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for v := range ca.IterVariables() {
		w := cb.GetVariableByScopeAndName(v.Scope(), v.Name())
		if w == nil {
			t.Fatalf("%s: %s lacks %s", what, b, v.ScopeAndName())
		}
		if !equalAny(v.MustValue().Value(), w.MustValue().Value()) {
			t.Fatalf("%s: variable %s differs", what, v.ScopeAndName())
		}
		n++
	}
	if n != cb.NumVariables() || n < 10 {
		t.Fatalf("%s: %d variables against %d", what, n, cb.NumVariables())
	}
}

// lossLog reads the losses of a run folder's log, by step.
func lossLog(t *testing.T, dir string) []float64 {
	t.Helper()
	data, err := os.ReadFile(LossLogPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for i, ln := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l LogLine
		if err := json.Unmarshal([]byte(ln), &l); err != nil {
			t.Fatal(err)
		}
		if l.Step != i+1 {
			t.Fatalf("%s: line %d is step %d", LossLogPath(dir), i+1, l.Step)
		}
		out = append(out, l.Loss)
	}
	return out
}

// TestDataParallelEqualsOneProcess: a run on 2 (or 4) ranks, each with its share of the
// batch, gives bit for bit the loss of every step and the final state (weights, EMA, Adam
// moments) of one process accumulating the same microbatches, for 1-clip and 2-clip
// microbatches.
func TestDataParallelEqualsOneProcess(t *testing.T) {
	cfg := microConfigs()
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	// One microbatch per rank for eight steps (the states compared at step 5 and at the
	// end); two per rank (gradient accumulation on every rank); four ranks.
	for _, tc := range []struct{ batch, micro, ranks, steps int }{{2, 1, 2, 8}, {8, 2, 2, 4}, {4, 1, 4, 6}} {
		steps := tc.steps
		t.Run(fmt.Sprintf("batch%d_micro%d_ranks%d", tc.batch, tc.micro, tc.ranks), func(t *testing.T) {
			one, dp := t.TempDir(), t.TempDir()
			o := func(dir string) Options {
				o := dpOptions(dir, steps, tc.micro, &cfg)
				o.Batch = tc.batch
				return o
			}
			r1, err := Run(stdcontext.Background(), b, o(one))
			if err != nil {
				t.Fatal(err)
			}
			rn, errs := runWorld(t, tc.ranks, o(dp))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if r1.Step != steps || rn.Step != steps || rn.Ranks != tc.ranks || len(rn.Times) != tc.ranks {
				t.Fatalf("one process reached step %d, %d ranks step %d with %d times", r1.Step, rn.Ranks, rn.Step, len(rn.Times))
			}
			l1, ln := lossLog(t, one), lossLog(t, dp)
			if len(l1) != steps || len(ln) != steps {
				t.Fatalf("loss logs of %d and %d steps", len(l1), len(ln))
			}
			for i := range l1 {
				if l1[i] != ln[i] {
					t.Fatalf("step %d: loss %v on one process, %v on %d ranks", i+1, l1[i], ln[i], tc.ranks)
				}
			}
			if !(l1[steps-1] < l1[0]) {
				t.Fatalf("the loss did not fall: %v -> %v", l1[0], l1[steps-1])
			}
			requireSameState(t, "one process vs data parallel", one, dp, PhaseVAE)
		})
	}
}

// TestMicroBatchSizeChangesTheSum: a batch in one microbatch and the same batch in two are
// the same mathematics but different float32 sums; the runs agree to rounding (relative
// 1e-4 on the loss of every step of a short run), not bit for bit, which is why
// equivalence across rank counts is stated for a fixed microbatch size.
func TestMicroBatchSizeChangesTheSum(t *testing.T) {
	cfg := microConfigs()
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	a, c := t.TempDir(), t.TempDir()
	if _, err := Run(stdcontext.Background(), b, dpOptions(a, 4, 4, &cfg)); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(stdcontext.Background(), b, dpOptions(c, 4, 2, &cfg)); err != nil {
		t.Fatal(err)
	}
	la, lc := lossLog(t, a), lossLog(t, c)
	for i := range la {
		if d := math.Abs(la[i]-lc[i]) / math.Abs(la[i]); d > 1e-4 {
			t.Fatalf("step %d: loss %v with one microbatch of 4, %v with two of 2 (relative %.2g)", i+1, la[i], lc[i], d)
		}
	}
}

// TestDataParallelRefusesUnevenShares: a batch whose microbatches do not split evenly over
// the ranks is refused on every rank with a message naming the batch.
func TestDataParallelRefusesUnevenShares(t *testing.T) {
	cfg := microConfigs()
	o := dpOptions(t.TempDir(), 1, 2, &cfg) // 2 microbatches of 2
	_, errs := runWorld(t, 4, o)
	for r, err := range errs {
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "--batch 4") {
			t.Fatalf("rank %d: %v, want ErrOptions naming --batch 4", r, err)
		}
	}
}

// TestDivergedRankIsNamed: a rank whose weights differ from rank 0's (here: started from
// another seed) ends the run at the first state check with ErrDiverged naming it.
func TestDivergedRankIsNamed(t *testing.T) {
	cfg := microConfigs()
	o := dpOptions(t.TempDir(), 3, 1, &cfg)
	_, errs := runWorldEach(t, 2, func(r int) Options {
		if r == 1 {
			o := o
			o.Seed = 99
			return o
		}
		return o
	})
	for r, err := range errs {
		if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "rank(s) [1]") {
			t.Fatalf("rank %d: %v, want ErrDiverged naming rank 1", r, err)
		}
	}
}

// TestStateHashIgnoresOnlyTheLearningRate: the state hash changes with any weight bit and
// not with the learning rate (which every step sets from the schedule).
func TestStateHashIgnoresOnlyTheLearningRate(t *testing.T) {
	_, w := microVAE(t, 1, 0)
	ctx := newContext(w)
	b, _ := nn.NewBackend("go")
	s, err := newStepper(b, ctx, 1e-3, 0, func(sc nn.Scope, in []*graph.Node) []*graph.Node { return nil })
	if err != nil {
		t.Fatal(err)
	}
	h0, err := stateHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetLR(5e-4); err != nil {
		t.Fatal(err)
	}
	if h, _ := stateHash(ctx); h != h0 {
		t.Fatal("the learning rate changed the state hash")
	}
	v := ctx.GetVariable("quant_conv.bias")
	d := w["quant_conv.bias"].Clone()
	d.Data[0] = math.Nextafter32(d.Data[0], 1)
	v.MustSetValue(tensors.FromFlatDataAndDimensions(d.Data, d.Shape...))
	if h, _ := stateHash(ctx); h == h0 {
		t.Fatal("one weight moved by one ulp, same state hash")
	}
	if got := tensorHash(hashTensor(0x0123456789abcdef)); got != 0x0123456789abcdef {
		t.Fatalf("hash through a tensor: %x", got)
	}
}

// TestDataParallelUNetPhase: the UNet phase (frozen VAE latents, image conditioning with
// dropout and noise augmentation, drawn in example order) on 2 ranks equals one process
// bit for bit.
func TestDataParallelUNetPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("micro UNet runs")
	}
	cfg := microConfigs()
	cfg.VAE = TinyConfigs().VAE // 8x8 latents: the micro VAE's 32x32 would make the UNet 16 times dearer
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	one, dp := t.TempDir(), t.TempDir()
	o := dpOptions(one, 0, 1, &cfg)
	if _, err := Run(stdcontext.Background(), b, o); err != nil { // the VAE checkpoint
		t.Fatal(err)
	}
	copyFile(t, StatePath(one, PhaseVAE), StatePath(dp, PhaseVAE))
	u := func(dir string) Options {
		o := dpOptions(dir, 2, 1, &cfg)
		o.Phase, o.Train, o.CondDropout = PhaseUNet, 2, 0.5
		return o
	}
	if _, err := Run(stdcontext.Background(), b, u(one)); err != nil {
		t.Fatal(err)
	}
	if _, errs := runWorld(t, 2, u(dp)); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	requireSameState(t, "unet phase", one, dp, PhaseUNet)
	l1, l2 := lossLog(t, one), lossLog(t, dp)
	if !slices.Equal(l1, l2) {
		t.Fatalf("losses %v on one process, %v on 2 ranks", l1, l2)
	}
}
