package unet

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/nn"
)

// ExpectedTensors lists every tensor name and shape the network reads, derived from cfg
// by running Build in a declaring scope (nothing is compiled or allocated).
func ExpectedTensors(cfg Config) (map[string][]int, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	n := cfg.NumBlocks()
	side := 1 << (n - 1) // the smallest latent that needs no size forwarding
	d := cfg.CrossAttentionDim[n-1]
	out, err := nn.DeclareShapes(func(s nn.Scope, g *graph.Graph) error {
		sample := graph.Parameter(g, "sample", nn.F32(1, 2, cfg.InChannels, side, side))
		ts := graph.Parameter(g, "timestep", nn.F32(1))
		ehs := graph.Parameter(g, "ehs", nn.F32(1, 1, d))
		ids := graph.Parameter(g, "ids", nn.F32(1, cfg.NumAddedTimeIDs()))
		Build(s, cfg, sample, ts, ehs, ids)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("unet: expected tensors of %s: %w", cfg.Path, err)
	}
	return out, nil
}
