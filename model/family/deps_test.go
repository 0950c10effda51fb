package family_test

import (
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
)

// TestDeps: the family seam is what generate, serve's pure core (dispatch, job, openai),
// plan and eval compile against; it declares what a family offers and resolves a --model
// value, and drags in no network library: a family's networks are under model/<family>,
// fine-tuning under train/finetune.
func TestDeps(t *testing.T) {
	deptest.Check(t, deptest.Rule{
		Package: "github.com/vdpp/vdpp/model/family",
		Deps: map[string]string{
			"github.com/gomlx/...":                 "GoMLX: serve's pure core compiles against the seam; the families' packages bring the networks",
			"github.com/vdpp/vdpp/model/nn/...":    "vdpp's network layers are the families'",
			"github.com/vdpp/vdpp/internal/sghook": "the CPU kernels are under model/nn",
			"github.com/vdpp/vdpp/model/svd/...":   "families register themselves; the seam knows none by name",
			"github.com/vdpp/vdpp/model/wan/...":   "families register themselves; the seam knows none by name",
			"github.com/vdpp/vdpp/plan":            "the planner asks the seam (plan.FamilyWeights), not the reverse",
			"github.com/vdpp/vdpp/train/...":       "fine-tuning is train/finetune's, which train and the families import",
			"github.com/vdpp/vdpp/serve/...":       "serve uses the seam, not the reverse",
			"go.etcd.io/bbolt":                     "records are the server's",
			"net/http/...":                         "the seam reads local folders and the local Hugging Face cache; it downloads nothing",
		},
		Imports: map[string]string{
			"github.com/vdpp/vdpp/comm": "items move between stages through the engine (pipeline), not the seam",
			"net":                       "the seam opens no sockets",
			"os/exec":                   "the seam starts no processes",
		},
	})
}
