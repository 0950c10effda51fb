package vae

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
)

// declareBackend is the backend graphs are declared on (nothing is ever compiled there).
var declareBackend = sync.OnceValues(func() (backends.Backend, error) { return nn.NewBackend("go") })

// ExpectedTensors returns every tensor of the AutoencoderKLTemporalDecoder state_dict for
// cfg (name -> shape): the encoder, quant_conv and the temporal decoder.
func ExpectedTensors(cfg checkpoint.VAEConfig) (map[string][]int, error) {
	return expectedParts(cfg, true, true)
}

// expectedParts returns the tensors of the encoder half ("encoder.*", "quant_conv.*")
// and/or the decoder half ("decoder.*").
func expectedParts(cfg checkpoint.VAEConfig, encoder, decoder bool) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	b, err := declareBackend()
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	got, err := nn.Declare(b, func(s nn.Scope, g *graph.Graph) error {
		if encoder {
			buildEncoder(s, g, nil, cfg)
		}
		if decoder {
			buildDecoder(s, g, nil, 1, cfg)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	return got, nil
}

// isDecoderTensor reports whether a state_dict name belongs to the decoder half.
func isDecoderTensor(name string) bool { return strings.HasPrefix(name, "decoder.") }
