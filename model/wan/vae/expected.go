package vae

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/nn"
)

// ExpectedTensors returns every tensor of the AutoencoderKLWan state_dict for cfg
// (name -> shape): encoder, quant_conv, post_quant_conv and decoder.
func ExpectedTensors(cfg Config) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	got, err := nn.DeclareShapes(func(s nn.Scope, g *graph.Graph) error {
		buildEncodeChunk(s, g, nil, nil, cfg)
		buildDecodeChunk(s, g, nil, nil, cfg)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wan/vae: %w", err)
	}
	return got, nil
}
