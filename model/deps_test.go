package model_test

import (
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
)

// TestDeps: package model is the Denoiser contract, tensors in and tensors out; it knows
// no network library, no transport and no file.
func TestDeps(t *testing.T) {
	deptest.Check(t, deptest.Rule{
		Package: "github.com/vdpp/vdpp/model",
		Deps: map[string]string{
			"github.com/gomlx/...":           "GoMLX: a Denoiser is any code that maps tensors; the families' networks implement it",
			"github.com/vdpp/vdpp/model/...": "the contract sits under every model package, not over one",
			"github.com/vdpp/vdpp/comm":      "a Denoiser is local; the engine moves items between processes",
			"github.com/vdpp/vdpp/pipeline":  "the engine uses the contract, not the reverse",
			"net/...":                        "a Denoiser does no networking",
			"go.etcd.io/bbolt":               "no records",
		},
		Imports: map[string]string{
			"os/...":  "no files or processes: weights are loaded by the families",
			"syscall": "no files or processes",
		},
	})
}
