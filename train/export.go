package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// ExportOptions configure Export.
type ExportOptions struct {
	Seed uint64 // seed of the run (the fixed image encoder and the UNet's initial weights)
	// Raw exports the trained weights themselves even where a checkpoint holds their
	// moving average (Options.EMA).
	Raw bool
}

// Export writes the diffusers folder of a run to out: model_index.json, the five component
// configs, unet/ and vae/ diffusion_pytorch_model.safetensors from the run's checkpoints
// (their weights' moving averages where the checkpoints have them, unless o.Raw; the
// UNet's initial weights when the run has no UNet checkpoint yet) and
// image_encoder/model.safetensors (the fixed random encoder of o.Seed). The VAE config gets
// the scaling factor the UNet phase trained with. vdpp_sampling.json gets the recipe's
// guidance and, as the decode chunk, the clip length the VAE phase last trained on (the
// recipe's 7 for a checkpoint written before that was recorded), so `--model OUT`
// samples as `--model builtin` does.
func Export(runDir, out string, o ExportOptions) error {
	seed := o.Seed
	cfgs := TinyConfigs()
	ucfg, _, ccfg, err := cfgs.Parsed()
	if err != nil {
		return err
	}
	vctx, vmeta, err := loadContext(StatePath(runDir, PhaseVAE))
	if err != nil {
		return err
	}
	smp := exportSampling(*cfgs.Sampling, vmeta, ucfg.NumFrames)
	cfgs.Sampling = &smp
	vw, err := exportWeights(vctx, o.Raw)
	if err != nil {
		return err
	}
	var uw map[string]*tensor.Dense
	uctx, umeta, err := loadContext(StatePath(runDir, PhaseUNet))
	switch {
	case err == nil:
		if uw, err = exportWeights(uctx, o.Raw); err != nil {
			return err
		}
		if sf, err := strconv.ParseFloat(umeta["scaling_factor"], 64); err == nil {
			cfgs.VAE["scaling_factor"] = sf
		}
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrCheckpoint):
		if uw, err = UNetInitWeights(ucfg, seed); err != nil {
			return err
		}
	default:
		return err
	}
	cw, err := CLIPWeights(ccfg, seed)
	if err != nil {
		return err
	}
	return WriteFolder(out, cfgs, uw, vw, cw)
}

// exportSampling is the sampling defaults Export writes: base with, as the decode chunk,
// the clip length the VAE checkpoint (metadata vaeMeta) last trained on where it records
// one, and all frames (0) when that covers the UNet's numFrames.
func exportSampling(base checkpoint.Sampling, vaeMeta map[string]string, numFrames int) checkpoint.Sampling {
	n, err := strconv.Atoi(vaeMeta[metaVAEFrames])
	switch {
	case err != nil || n <= 0:
	case n >= numFrames:
		base.DecodeChunkSize = 0
	default:
		base.DecodeChunkSize = n
	}
	return base
}

// exportWeights returns the weights of a phase checkpoint to export: the moving averages
// where it has them, unless raw.
func exportWeights(ctx *context.Context, raw bool) (map[string]*tensor.Dense, error) {
	if raw {
		return modelWeights(ctx)
	}
	w, _, err := emaWeights(ctx)
	return w, err
}

// WriteFolder writes a diffusers folder from configs and weights, and cfgs.Sampling as
// checkpoint.SamplingFile when it is set.
func WriteFolder(out string, cfgs Configs, unetW, vaeW, clipW map[string]*tensor.Dense) error {
	files := map[string]map[string]any{
		checkpoint.IndexFile:                                                      cfgs.Index,
		filepath.Join(unet.Component, "config.json"):                              cfgs.UNet,
		filepath.Join(vae.Component, "config.json"):                               cfgs.VAE,
		filepath.Join(clip.Component, "config.json"):                              cfgs.CLIP,
		filepath.Join(svd.Scheduler, "scheduler_config.json"):                     cfgs.Scheduler,
		filepath.Join(clip.FeatureExtractorComponent, "preprocessor_config.json"): cfgs.Features,
	}
	for name, m := range files {
		b, err := marshal(m)
		if err != nil {
			return err
		}
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("train: export: %w", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("train: export: %w", err)
		}
	}
	if cfgs.Sampling != nil {
		if err := cfgs.Sampling.Validate(); err != nil {
			return fmt.Errorf("train: export %s: %w", checkpoint.SamplingFile, err)
		}
		b, err := json.MarshalIndent(cfgs.Sampling, "", "  ")
		if err != nil {
			return fmt.Errorf("train: export %s: %w", checkpoint.SamplingFile, err)
		}
		if err := os.WriteFile(filepath.Join(out, checkpoint.SamplingFile), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("train: export: %w", err)
		}
	}
	weights := map[string]map[string]*tensor.Dense{
		filepath.Join(unet.Component, "diffusion_pytorch_model.safetensors"): unetW,
		filepath.Join(vae.Component, "diffusion_pytorch_model.safetensors"):  vaeW,
		filepath.Join(clip.Component, "model.safetensors"):                   clipW,
	}
	for name, w := range weights {
		if err := safetensors.WriteMapFile(filepath.Join(out, name), w, map[string]string{"format": "pt"}); err != nil {
			return fmt.Errorf("train: export %s: %w", name, err)
		}
	}
	return nil
}
