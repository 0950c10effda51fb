package family

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/tensor/quant"
)

// WeightOptions say where a model's denoiser weights come from and the type its weights are
// held in: what --weights-dtype, --transformer, --transformer-2 and --unet set on every
// command that loads a model. They are load options (one per process or server), not job
// parameters.
type WeightOptions struct {
	// DType is --weights-dtype: "" or "auto" keeps each tensor's stored type; a weight type
	// of tensor/quant's table ("bf16", "q8_0", "q4_k", ...) converts the networks' weights
	// at load, as stable-diffusion.cpp's --type does (a tensor whose rows do not fit the
	// type's blocks takes quant.Type.Fallback).
	DType string
	// Files replace the folder's weights of a denoiser component by one file each, keyed by
	// the component's name ("transformer", "transformer_2", "unet"): a GGUF or safetensors
	// file in the layouts the family reads. The rest (configs, VAE, encoders, scheduler)
	// comes from the folder.
	Files map[string]string
}

// AutoDType is --weights-dtype's value that keeps what the files store.
const AutoDType = "auto"

// Type returns the weight type asked for; auto is true when the stored types are kept.
func (w WeightOptions) Type() (t quant.Type, auto bool, err error) {
	if w.DType == "" || strings.EqualFold(w.DType, AutoDType) {
		return 0, true, nil
	}
	t, err = quant.Parse(w.DType)
	if err != nil {
		return 0, false, fmt.Errorf("--weights-dtype: %w", err)
	}
	return t, false, nil
}

// FileFlag is the flag that sets a component's file: "transformer_2" -> "transformer-2".
func FileFlag(component string) string { return strings.ReplaceAll(component, "_", "-") }

// FileComponents are the denoiser components whose weights a file may replace, in the order
// help lists their flags. A family reads those of its own.
var FileComponents = []string{"transformer", "transformer_2", "unet"}

// Check refuses a --weights-dtype that is not a weight type and a file for a component a
// family does not have (has lists the family's, in FileComponents' names); family names the
// family in the message.
func (w WeightOptions) Check(family string, has ...string) error {
	if _, _, err := w.Type(); err != nil {
		return err
	}
	comps := make([]string, 0, len(w.Files))
	for c := range w.Files {
		comps = append(comps, c)
	}
	slices.Sort(comps)
	for _, c := range comps {
		if w.Files[c] == "" {
			continue
		}
		if !slices.Contains(has, c) {
			flags := make([]string, len(has))
			for i, h := range has {
				flags[i] = "--" + FileFlag(h)
			}
			takes := "no weights file"
			if len(flags) > 0 {
				takes = strings.Join(flags, ", ")
			}
			return fmt.Errorf("--%s: a %s model has no %s component (it takes %s)", FileFlag(c), family, c, takes)
		}
	}
	return nil
}

// File returns the file replacing a component's weights ("" for the folder's).
func (w WeightOptions) File(component string) string { return w.Files[component] }

// Args returns the options as command-line flags (for the processes a launcher starts).
func (w WeightOptions) Args() []string {
	var out []string
	if w.DType != "" {
		out = append(out, "--weights-dtype="+w.DType)
	}
	for _, c := range FileComponents {
		if f := w.Files[c]; f != "" {
			out = append(out, "--"+FileFlag(c)+"="+f)
		}
	}
	return out
}
