package wan

import (
	"errors"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/umt5"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Weights implements family.Weigher: the bytes of what each role loads, from the configs:
// the text encoder conditions (only when o.Prompts: prompt embeddings need none), and so
// do, for a folder that takes an image, the VAE (encoding the condition) and the image
// encoder's layers; each expert denoises its steps, the VAE decodes. The experts are
// counted as nn.NewWeightsHeld holds them on o.Backend (nn.HoldingForSpec): their stored
// types (the folder's or --transformer's files; float32 for a folder of configs without
// weights) held as o.Weights.DType says; the other networks in float32.
func (wanFamily) Weights(dir string, o family.Options) (family.Weights, error) {
	f, err := Open(dir)
	if err != nil {
		return family.Weights{}, err
	}
	if err := checkWeightOptions(f, o); err != nil {
		return family.Weights{}, err
	}
	holding, err := nn.HoldingForSpec(o.Backend)
	if err != nil {
		return family.Weights{}, err
	}
	w := family.Weights{Types: map[string]int64{}}
	for e := 1; e <= f.Experts(); e++ {
		cfg, err := f.TransformerConfig(e)
		if err != nil {
			return family.Weights{}, err
		}
		t, err := transformer.ExpectedTensors(cfg)
		if err != nil {
			return family.Weights{}, err
		}
		tdir, _ := f.TransformerDir(e)
		to := transformerOptions(e, o)
		stored, err := storedTypes(func() (*checkpoint.Stored, error) { return transformer.OpenWeights(tdir, cfg, to) }, to.File == "")
		if err != nil {
			return family.Weights{}, err
		}
		held, err := nn.HeldTypes(holding, t, stored, to.Hold)
		if err != nil {
			return family.Weights{}, err
		}
		var sum int64
		for typ, n := range held {
			sum += n
			w.Types[typ.String()] += n
		}
		w.Denoisers = append(w.Denoisers, sum)
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
	w.Types["f32"] += w.Condition + w.Decode
	return w, nil
}

// storedTypes returns the stored type of each tensor of the weights open opens (headers
// only), or, with folder set, float32 for every tensor when the folder has no weights file
// (a folder of configs, sized before its weights are downloaded).
func storedTypes(open func() (*checkpoint.Stored, error), folder bool) (func(string) quant.Type, error) {
	st, err := open()
	if folder && errors.Is(err, checkpoint.ErrWeights) {
		return func(string) quant.Type { return quant.F32 }, nil
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	types := map[string]quant.Type{}
	for _, n := range st.Names() {
		types[n], _ = st.Type(n)
	}
	return func(name string) quant.Type { return types[name] }, nil
}

var _ family.Weigher = wanFamily{}
