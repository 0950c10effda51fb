package vae

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/nn"
)

// ExpectedTensors returns every tensor of the AutoencoderKLTemporalDecoder state_dict for
// cfg (name -> shape): the encoder, quant_conv and the temporal decoder.
func ExpectedTensors(cfg Config) (map[string][]int, error) {
	return expectedParts(cfg, true, true)
}

// expectedParts returns the tensors of the encoder half ("encoder.*", "quant_conv.*")
// and/or the decoder half ("decoder.*").
func expectedParts(cfg Config, encoder, decoder bool) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	got, err := nn.DeclareShapes(func(s nn.Scope, g *graph.Graph) error {
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

// SplitTensors splits ExpectedTensors into the encoder's half and the decoder's, as
// LoadParts loads them: what a stage holding only one half keeps.
func SplitTensors(cfg Config) (encoder, decoder map[string][]int, err error) {
	all, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, nil, err
	}
	encoder, decoder = map[string][]int{}, map[string][]int{}
	for name, shape := range all {
		if isDecoderTensor(name) {
			decoder[name] = shape
		} else {
			encoder[name] = shape
		}
	}
	return encoder, decoder, nil
}
