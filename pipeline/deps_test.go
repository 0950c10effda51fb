package pipeline_test

import (
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
)

// TestDeps: the engine runs any model.Denoiser over comm's transports; networks,
// families, the planner and the server sit above it.
func TestDeps(t *testing.T) {
	deptest.Check(t, deptest.Rule{
		Package: "github.com/vdpp/vdpp/pipeline",
		Deps: map[string]string{
			"github.com/gomlx/...":               "GoMLX: the engine steps model.Denoisers; the families run the networks",
			"github.com/vdpp/vdpp/model/nn/...":  "vdpp's network layers are the families'",
			"github.com/vdpp/vdpp/model/family":  "the families sit above the engine and hand it Steppers",
			"github.com/vdpp/vdpp/model/svd/...": "no family is known to the engine",
			"github.com/vdpp/vdpp/model/wan/...": "no family is known to the engine",
			"github.com/vdpp/vdpp/plan":          "the planner sizes pipelines; the engine runs the ranges it is given",
			"github.com/vdpp/vdpp/serve/...":     "the server drives the engine, not the reverse",
			"go.etcd.io/bbolt":                   "records are the server's",
			"net/http/...":                       "the engine hands items over comm's transports; it serves nothing",
		},
		Imports: map[string]string{
			"os/...":  "the engine reads no files and starts no processes",
			"syscall": "the engine reads no files and starts no processes",
			"net":     "the engine reaches other processes only through comm.Transport",
		},
	})
}
