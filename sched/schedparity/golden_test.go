package schedparity

import (
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

// TestWanDevCases checks the scheduler cases of shared/golden/wan-dev.
func TestWanDevCases(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev", "cases")
	for _, name := range []string{"scheduler_unipc", "scheduler_flow_euler"} {
		t.Run(name, func(t *testing.T) {
			res, err := CheckCase(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, res)
		})
	}
}

func checkResults(t *testing.T, res []Result) {
	t.Helper()
	if len(res) == 0 {
		t.Fatal("no tensors compared")
	}
	for _, r := range res {
		t.Logf("%-16s rel L2 %.3e  max|d| %.3e  max ulp %d", r.Tensor, r.RelL2, r.MaxAbs, r.MaxULP)
		if !r.Pass {
			t.Errorf("%s: rel L2 %.3e, max ulp %d (limit %s) %s", r.Tensor, r.RelL2, r.MaxULP, r.Limit, r.Error)
		}
		if (r.Tensor == "timesteps" || r.Tensor == "sigmas") && r.MaxULP != 0 {
			t.Errorf("%s: %d ulp, want exact", r.Tensor, r.MaxULP)
		}
	}
}
