package svd

import (
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
)

// Preflight checks a checkpoint folder without loading weights: model_index.json, every
// config, and the header of every weights file a run with parts would read, against the
// tensors the networks expect (names and shapes). Errors name the file and the tensor.
func Preflight(dir, variant string, parts Parts) (*checkpoint.Checkpoint, error) {
	return PreflightWith(dir, LoadOptions{Variant: variant}, parts)
}

// PreflightWith is Preflight for the weights o names.
func PreflightWith(dir string, o LoadOptions, parts Parts) (*checkpoint.Checkpoint, error) {
	variant := o.Variant
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	ucfg, err := unet.ReadConfig(ck)
	if err != nil {
		return nil, err
	}
	vcfg, err := vae.ReadConfig(ck)
	if err != nil {
		return nil, err
	}
	ccfg, err := clip.ReadConfig(ck)
	if err != nil {
		return nil, err
	}
	if _, err := clip.ReadFeatureExtractor(ck); err != nil {
		return nil, err
	}
	if _, err := ck.ConfigPath(Scheduler); err != nil {
		return nil, err
	}
	type check struct {
		component, variant string
		expected           func() (map[string][]int, error)
		opts               checkpoint.LoadOptions
	}
	var checks []check
	if parts.Denoiser {
		if o.UNetFile != "" {
			st, err := unet.OpenWeights(ck, ucfg, unet.LoadOptions{File: o.UNetFile}) // headers only
			if err != nil {
				return nil, err
			}
			st.Close()
		} else {
			checks = append(checks, check{unet.Component, variant, func() (map[string][]int, error) { return unet.ExpectedTensors(ucfg) }, checkpoint.LoadOptions{}})
		}
	}
	if parts.Conditioner {
		checks = append(checks, check{clip.Component, clipVariant(ck, variant), func() (map[string][]int, error) { return clip.ExpectedTensors(ccfg) },
			checkpoint.LoadOptions{Ignore: []string{clip.PositionIDsBuffer}}})
	}
	if parts.Conditioner || parts.Decoder {
		checks = append(checks, check{vae.Component, vaeVariant(ck, variant), func() (map[string][]int, error) { return vae.ExpectedTensors(vcfg) }, checkpoint.LoadOptions{}})
	}
	for _, c := range checks {
		exp, err := c.expected()
		if err != nil {
			return nil, err
		}
		st, err := ck.OpenComponent(c.component, c.variant, exp, c.opts) // headers only
		if err != nil {
			return nil, err
		}
		if err := st.Close(); err != nil {
			return nil, err
		}
	}
	return ck, nil
}
