package family

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/tensor/quant"
)

// WeightOptions say where a model's denoiser weights come from and the type they are held
// in: what --weights-dtype, --transformer, --transformer-2 and --unet set on every command
// that loads a model. They are load options (one per process or server), not job
// parameters.
type WeightOptions struct {
	// DType is --weights-dtype: "" or "auto" holds each tensor of the denoisers as stored; a
	// weight type of tensor/quant's table ("bf16", "q8_0", "q4_k", ...) converts their weight
	// matrices at load, as stable-diffusion.cpp's --type does (a matrix whose rows do not fit
	// the type's blocks takes quant.Type.Fallback; norms and biases stay float32); a mix of
	// tensor/quant ("q4_k_m") picks each matrix's type by its name, as the GGUF file type does.
	DType string
	// Transformer, Transformer2 and UNet replace the folder's weights of that denoiser
	// component (transformer, transformer_2, unet) with one GGUF or safetensors file in a
	// layout the family reads; "" keeps the folder's. The rest (configs, VAE, encoders,
	// scheduler) comes from the folder.
	Transformer, Transformer2, UNet string
}

// FileComponents are the denoiser components whose weights a file may replace, in the order
// help lists their flags. A family reads those of its own.
var FileComponents = []string{"transformer", "transformer_2", "unet"}

// FileFlag is the flag that sets a component's file: "transformer_2" -> "transformer-2".
func FileFlag(component string) string { return strings.ReplaceAll(component, "_", "-") }

// file returns the field holding a component's file.
func (w *WeightOptions) file(component string) *string {
	switch component {
	case "transformer":
		return &w.Transformer
	case "transformer_2":
		return &w.Transformer2
	case "unet":
		return &w.UNet
	}
	return nil
}

// File returns the file replacing a component's weights ("" for the folder's).
func (w WeightOptions) File(component string) string {
	if p := w.file(component); p != nil {
		return *p
	}
	return ""
}

// Check refuses a --weights-dtype that is not a weight type and a file for a component a
// family does not have (has lists the family's, in FileComponents' names); family names the
// family in the message.
func (w WeightOptions) Check(family string, has ...string) error {
	if w.DType != "" && !strings.EqualFold(w.DType, "auto") {
		if err := quant.CheckDType(w.DType); err != nil {
			return fmt.Errorf("--weights-dtype: %w", err)
		}
	}
	for _, c := range FileComponents {
		if w.File(c) == "" || slices.Contains(has, c) {
			continue
		}
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
	return nil
}

// Args returns the options as command-line flags (for the processes a launcher starts).
func (w WeightOptions) Args() []string {
	var out []string
	if w.DType != "" && !strings.EqualFold(w.DType, "auto") {
		out = append(out, "--weights-dtype="+w.DType)
	}
	for _, c := range FileComponents {
		if f := w.File(c); f != "" {
			out = append(out, "--"+FileFlag(c)+"="+f)
		}
	}
	return out
}

// RegisterFlags binds the options to fs: --weights-dtype and a file flag per component of
// FileComponents (--transformer, --transformer-2, --unet). Every command that loads a model
// registers them through this one function, so their names and help are declared once.
func (w *WeightOptions) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&w.DType, "weights-dtype", w.DType, "the `TYPE` the denoiser's weights are held in: auto (as the files store them; the default) or "+
		strings.Join(quant.DTypeFlags(), ", ")+", converted at load as stable-diffusion.cpp's --type does (a matrix whose rows do not fit a block type takes the nearest type that does; q4_k_m as ComfyUI-GGUF's Q4_K_M files hold them; on XLA or go:kernels=off, which lack vdpp's CPU kernels, only bf16 (and f16 on XLA) is held as asked, other types in f32; docs/weights.md)")
	help := map[string]string{
		"transformer":   "Wan: a GGUF or safetensors `FILE` replacing the folder's transformer (the high-noise expert of Wan 2.2) weights; Wan's original layout (Wan-AI, Comfy-Org, city96, stable-diffusion.cpp) or diffusers'",
		"transformer_2": "Wan 2.2: a GGUF or safetensors `FILE` replacing the folder's transformer_2 (the low-noise expert) weights",
		"unet":          "SVD: a GGUF or safetensors `FILE` in diffusers' names replacing the folder's UNet weights",
	}
	for _, c := range FileComponents {
		p := w.file(c)
		fs.StringVar(p, FileFlag(c), *p, help[c])
	}
}
