package nn

import (
	"math/rand/v2"
	"os"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/tensor"
)

// TestSimpleGoGEMMInstalled fails when the CPU has the assembly kernel but vdpp could not
// install it into simplego: the sign that a GoMLX upgrade changed what the installation
// relies on (see simpleGoNormalizedDot).
func TestSimpleGoGEMMInstalled(t *testing.T) {
	installed, err := SimpleGoGEMM()
	switch {
	case os.Getenv(GEMMEnv) == "simplego":
		if installed {
			t.Fatalf("%s=simplego but the kernel was installed", GEMMEnv)
		}
	case gemm.Accelerated():
		if !installed || err != nil {
			t.Fatalf("SimpleGoGEMM() = %v, %v; want installed", installed, err)
		}
	default:
		if installed {
			t.Fatal("installed without an accelerated kernel")
		}
	}
}

// TestDotGeneralBatchedTransposed runs a DotGeneral whose operands simplego must
// transpose into its normalised layout (batch axis in the middle of lhs, contracting axis
// first in rhs) and compares it with a naive product: the kernel sees the batch range and
// the normalised sizes the way simplego lays them out.
func TestDotGeneralBatchedTransposed(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const bsz, m, k, n = 3, 37, 21, 19
	lhs := randDense(r, m, bsz, k) // [m, batch, k]
	rhs := randDense(r, k, bsz, n) // [k, batch, n]
	got := runOp(t, func(in []*Node) *Node {
		return DotGeneral(in[0], []int{2}, []int{1}, in[1], []int{0}, []int{1}) // [batch, m, n]
	}, lhs, rhs)
	want := make([]float32, bsz*m*n)
	for b := range bsz {
		for i := range m {
			for j := range n {
				var s float64
				for p := range k {
					s += float64(lhs.Data[(i*bsz+b)*k+p]) * float64(rhs.Data[(p*bsz+b)*n+j])
				}
				want[(b*m+i)*n+j] = float32(s)
			}
		}
	}
	checkClose(t, "batched transposed DotGeneral", got, &tensor.Dense{Shape: []int{bsz, m, n}, Data: want}, tol)
}
