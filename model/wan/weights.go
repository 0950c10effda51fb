package wan

import (
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/umt5"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
)

// Weights implements family.Weigher: the float32 bytes of what each role loads, from the
// configs: the text encoder conditions (only when o.Prompts: prompt embeddings need none),
// each expert denoises its steps, the VAE decodes.
func (wanFamily) Weights(dir string, o family.Options) (family.Weights, error) {
	f, err := Open(dir)
	if err != nil {
		return family.Weights{}, err
	}
	var w family.Weights
	for e := 1; e <= f.Experts(); e++ {
		cfg, err := f.TransformerConfig(e)
		if err != nil {
			return family.Weights{}, err
		}
		t, err := transformer.ExpectedTensors(cfg)
		if err != nil {
			return family.Weights{}, err
		}
		w.Denoisers = append(w.Denoisers, nn.Float32Bytes(t))
	}
	vcfg, err := f.VAEConfig()
	if err != nil {
		return family.Weights{}, err
	}
	v, err := vae.ExpectedTensors(vcfg)
	if err != nil {
		return family.Weights{}, err
	}
	w.Decode = nn.Float32Bytes(v)
	if o.Prompts {
		if err := f.CheckText(); err != nil {
			return family.Weights{}, err
		}
		cfg, err := umt5.ReadConfig(f.ComponentDir(TextEncoder))
		if err != nil {
			return family.Weights{}, err
		}
		t, err := umt5.ExpectedTensors(cfg)
		if err != nil {
			return family.Weights{}, err
		}
		w.Condition = nn.Float32Bytes(t)
	}
	return w, nil
}

var _ family.Weigher = wanFamily{}
