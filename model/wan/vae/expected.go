package vae

import (
	"fmt"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/nn"
)

// declareBackend is the backend graphs are declared on (nothing is ever compiled there).
var declareBackend = sync.OnceValues(func() (backends.Backend, error) { return nn.NewBackend("go") })

// ExpectedTensors returns every tensor of the AutoencoderKLWan state_dict for cfg
// (name -> shape): encoder, quant_conv, post_quant_conv and decoder.
func ExpectedTensors(cfg Config) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := declareBackend()
	if err != nil {
		return nil, fmt.Errorf("wan/vae: %w", err)
	}
	got, err := nn.Declare(b, func(s nn.Scope, g *graph.Graph) error {
		buildEncodeChunk(s, g, nil, nil, cfg)
		buildDecodeChunk(s, g, nil, nil, cfg)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wan/vae: %w", err)
	}
	return got, nil
}
