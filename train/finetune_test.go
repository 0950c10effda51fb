package train

import (
	stdcontext "context"
	"errors"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/nn"
	_ "github.com/vdpp/vdpp/model/wan" // the family fine-tuned here
)

// wanFineTuneOptions fine-tune wan-dev's low-noise expert on 4 training clips.
func wanFineTuneOptions(t *testing.T, dir string, steps int) Options {
	o := DefaultOptions()
	o.Phase, o.Model, o.Dir, o.Steps = PhaseFineTune, shared.Require(t, "golden", "wan-dev"), dir, steps
	o.Train, o.Batch, o.LR, o.CheckpointEvery = 4, 2, 1e-3, 0
	return o
}

// TestFineTuneWanLowersHeldOutLoss: fine-tuning a Wan expert on the procedural clips lowers
// the flow-matching loss on held-out clips (fixed noise and noise levels).
func TestFineTuneWanLowersHeldOutLoss(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	o := wanFineTuneOptions(t, t.TempDir(), 16)
	o.HeldOut = 2
	r, err := Run(stdcontext.Background(), b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("training loss %.4f -> %.4f, held-out %.4f -> %.4f", r.FirstLoss, r.LastLoss, r.FirstHeldOut, r.LastHeldOut)
	if math.IsNaN(r.FirstHeldOut) || !(r.LastHeldOut < 0.8*r.FirstHeldOut) {
		t.Fatalf("held-out loss %v -> %v: did not fall by 20%%", r.FirstHeldOut, r.LastHeldOut)
	}
}

// TestFineTuneWanDataParallel: the fine-tune on 2 ranks gives one process's state bit for
// bit (Wan's examples are keyed by step and index, whoever draws them).
func TestFineTuneWanDataParallel(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	one, dp := t.TempDir(), t.TempDir()
	if _, err := Run(stdcontext.Background(), b, wanFineTuneOptions(t, one, 3)); err != nil {
		t.Fatal(err)
	}
	if _, errs := runWorld(t, 2, wanFineTuneOptions(t, dp, 3)); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	requireSameState(t, "wan fine-tune", one, dp, PhaseFineTune)
}

// TestFineTuneWanLossGradient checks the gradient of the flow-matching loss with respect to
// every weight of the Wan transformer against finite differences.
func TestFineTuneWanLossGradient(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles two Wan training graphs")
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	task, err := openFineTune(b, wanFineTuneOptions(t, t.TempDir(), 1))
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	w, err := task.Weights()
	if err != nil {
		t.Fatal(err)
	}
	in, err := task.Examples(0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	gc := newGradChecker(t, w, func(s nn.Scope, in []*graph.Node) *graph.Node { return task.Loss(s, in)[0] }, in...)
	// A larger step than the UNet's: the attention biases' derivatives are small (near the
	// softmax's shift invariance) and need it to rise above float32 noise.
	gc.check(w, 5e-2, 0.1)
}
