package cp_test

import (
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
)

// TestDeps: the exchanges are copies of tensors between the members; they run no network.
func TestDeps(t *testing.T) {
	deptest.Check(t, deptest.Rule{
		Package: "github.com/vdpp/vdpp/model/cp",
		Deps: map[string]string{
			"github.com/gomlx/...":               "GoMLX: the exchanges copy tensors; the families' segments run the networks",
			"github.com/vdpp/vdpp/model/svd/...": "the families import cp, not the reverse",
			"github.com/vdpp/vdpp/model/wan/...": "the families import cp, not the reverse",
			"github.com/vdpp/vdpp/model/nn/...":  "the exchanges copy tensors; the networks are the families'",
			"github.com/vdpp/vdpp/comm":          "a member reaches the group through model.FrameComm, which comm.Group implements",
		},
	})
}
