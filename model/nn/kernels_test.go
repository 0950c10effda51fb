package nn

import (
	"os"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/sghook"
)

// TestCPUKernelsInstalled fails when vdpp could not install its CPU kernels into simplego:
// the sign that a GoMLX upgrade changed what internal/sghook relies on.
func TestCPUKernelsInstalled(t *testing.T) {
	parts, err := CPUKernels()
	want := sghook.All
	switch os.Getenv(KernelsEnv) {
	case "off":
		want = 0
	case "gemm":
		want = sghook.GEMM
	}
	if !gemm.Accelerated() {
		want &^= sghook.GEMM
	}
	if err != nil || parts != want {
		t.Fatalf("CPUKernels() = %b, %v; want %b installed", parts, err, want)
	}
	if got := UsesKernels(testBackend(t)); got != (want&sghook.Fused != 0 && IsSimpleGo(testBackend(t))) {
		t.Errorf("UsesKernels = %v with %b installed", got, parts)
	}
}

// TestAttentionIsOneOp checks that with the kernels installed Attention adds one fused op
// to a graph (instead of the dozen ops of its plain form).
func TestAttentionIsOneOp(t *testing.T) {
	b := testBackend(t)
	if !UsesKernels(b) {
		t.Skip("no fused CPU kernels on this backend")
	}
	g := NewGraph(b, t.Name())
	defer g.Finalize()
	sh := shapes.Make(dtypes.Float32, 2, 5, 8)
	q, k, v := Parameter(g, "q", sh), Parameter(g, "k", sh), Parameter(g, "v", sh)
	before := len(g.Nodes())
	Attention(q, k, v, 2)
	if added := len(g.Nodes()) - before; added != 1 {
		t.Fatalf("Attention added %d nodes, want 1 fused op", added)
	}
}
