package train

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// gradChecker evaluates a training loss and its gradient with respect to every model
// variable of a context, in a graph marked for training (the forms training uses).
type gradChecker struct {
	t     *testing.T
	ctx   *context.Context
	names []string
	grad  *context.Exec
	loss  *context.Exec
	args  []any
}

func newGradChecker(t *testing.T, weights map[string]*tensor.Dense, loss func(nn.Scope, []*graph.Node) *graph.Node, inputs ...*tensor.Dense) *gradChecker {
	t.Helper()
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	gc := &gradChecker{t: t, ctx: newContext(weights)}
	for n := range weights {
		gc.names = append(gc.names, n)
	}
	sort.Strings(gc.names)
	for _, in := range inputs {
		gc.args = append(gc.args, tensors.FromFlatDataAndDimensions(in.Data, in.Shape...))
	}
	gc.grad, err = context.NewExec(b, gc.ctx, func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		g := in[0].Graph()
		l := loss(nn.ContextScope(ctx), in)
		vars := make([]*graph.Node, len(gc.names))
		for i, n := range gc.names {
			vars[i] = ctx.GetVariableByScopeAndName(context.RootScope, n).ValueGraph(g)
		}
		return append([]*graph.Node{l}, graph.Gradient(l, vars...)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	gc.loss, err = context.NewExec(b, gc.ctx, func(ctx *context.Context, in []*graph.Node) *graph.Node {
		return loss(nn.ContextScope(ctx), in)
	})
	if err != nil {
		t.Fatal(err)
	}
	return gc
}

func (gc *gradChecker) gradients() map[string][]float32 {
	outs, err := gc.grad.Exec(gc.args...)
	if err != nil {
		gc.t.Fatal(err)
	}
	m := map[string][]float32{}
	for i, n := range gc.names {
		v, err := tensors.CopyFlatData[float32](outs[i+1])
		if err != nil {
			gc.t.Fatal(err)
		}
		m[n] = v
	}
	return m
}

func (gc *gradChecker) lossAt(name string, w []float32) float64 {
	v := gc.ctx.GetVariableByScopeAndName(context.RootScope, name)
	if err := v.SetValue(tensors.FromFlatDataAndDimensions(w, v.Shape().Dimensions...)); err != nil {
		gc.t.Fatal(err)
	}
	outs, err := gc.loss.Exec(gc.args...)
	if err != nil {
		gc.t.Fatal(err)
	}
	l, err := tensors.CopyFlatData[float32](outs[0])
	if err != nil {
		gc.t.Fatal(err)
	}
	return float64(l[0])
}

// check compares, for every variable, the gradient's directional derivative along a random
// direction with a central finite difference of the loss; a wrong gradient rule anywhere in
// the network (an op whose gradient training relies on) shows up as a large mismatch.
//
// epsScale sets the step (relative to the tensor's RMS) and tol the relative tolerance:
// float32 losses put a floor under the step, and the curvature of a randomly initialised
// network a ceiling, so both are per network.
func (gc *gradChecker) check(weights map[string]*tensor.Dense, epsScale, tol float64) {
	grads := gc.gradients()
	r := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for _, n := range gc.names {
		w0 := weights[n].Data
		var rms float64
		for _, x := range w0 {
			rms += float64(x) * float64(x)
		}
		rms = math.Sqrt(rms / float64(len(w0)))
		eps := epsScale * max(rms, 0.1)
		dir := make([]float64, len(w0))
		var gdot float64
		for i := range dir {
			dir[i] = r.NormFloat64()
			gdot += dir[i] * float64(grads[n][i])
		}
		at := func(h float64) float64 {
			w := make([]float32, len(w0))
			for i := range w {
				w[i] = w0[i] + float32(h*dir[i])
			}
			return gc.lossAt(n, w)
		}
		fd := (at(eps) - at(-eps)) / (2 * eps)
		gc.lossAt(n, append([]float32(nil), w0...))
		scale := max(math.Abs(gdot), math.Abs(fd))
		if scale < 1e-3 {
			continue // the loss hardly depends on this direction: float32 noise dominates
		}
		checked++
		// Float32 losses resolve about 1e-7 / eps; allow that floor besides tol.
		if diff := math.Abs(gdot - fd); diff > tol*scale+2e-4 {
			rel := diff / scale
			gc.t.Errorf("%s: directional derivative %.6g, finite difference %.6g (relative error %.3f)", n, gdot, fd, rel)
		}
	}
	if checked < len(gc.names)/3 {
		gc.t.Fatalf("only %d of %d variables had a measurable derivative", checked, len(gc.names))
	}
	gc.t.Logf("%d of %d variables checked", checked, len(gc.names))
}

// TestVAELossGradient checks the gradient of the VAE training loss with respect to every
// encoder and decoder weight against finite differences.
func TestVAELossGradient(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles two VAE training graphs")
	}
	vcfg, w := microVAE(t, 1, 0.05)
	x, eps := frames(1, 2, 3, 8, 8), fill(2, 2, 4, 4, 4)
	gc := newGradChecker(t, w, func(s nn.Scope, in []*graph.Node) *graph.Node {
		_, mse := vaeLoss(s, vcfg, in[0], in[1], 2)
		return mse // smooth (the L1 term's kinks would blur finite differences)
	}, x, eps)
	gc.check(w, 1e-2, 0.1)
}

// TestUNetLossGradient checks the gradient of the EDM v-loss with respect to every UNet
// weight against finite differences.
func TestUNetLossGradient(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles two UNet training graphs")
	}
	ucfg, w := microUNet(t)
	x0, noise, sigma, lat, ehs, ids := unetBatch()
	gc := newGradChecker(t, w, func(s nn.Scope, in []*graph.Node) *graph.Node {
		return unetLoss(s, ucfg, in[0], in[1], in[2], in[3], in[4], in[5])
	}, x0, noise, sigma, lat, ehs, ids)
	// The random UNet is strongly curved along some directions (GroupNorms over 4x4 maps):
	// a smaller step and a looser tolerance; a missing or wrongly signed gradient path still
	// fails by far.
	gc.check(w, 3e-3, 0.35)
}
