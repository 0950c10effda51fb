package wan

import (
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/clip"
	"github.com/vdpp/vdpp/model/umt5"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
)

// Weights implements family.Weigher: the float32 bytes of what each role loads, from the
// configs: the text encoder conditions (only when o.Prompts: prompt embeddings need none),
// and so do, for a folder that takes an image, the VAE (encoding the condition) and the
// image encoder's layers; each expert denoises its steps, the VAE decodes.
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
	spec, err := f.ImageSpec()
	if err != nil {
		return family.Weights{}, err
	}
	if spec.Image != family.NeedNone {
		// The image conditioner: the VAE (its encoder makes the condition latents; the
		// whole VAE loads) and, with the image branch, the image encoder's layers it runs.
		w.Condition += w.Decode
		if spec.Encoder {
			layers, err := spec.CLIP.HiddenLayers(ImageHiddenState)
			if err != nil {
				return family.Weights{}, err
			}
			c, err := clip.HiddenTensors(spec.CLIP, layers)
			if err != nil {
				return family.Weights{}, err
			}
			w.Condition += nn.Float32Bytes(c)
		}
	}
	return w, nil
}

var _ family.Weigher = wanFamily{}
