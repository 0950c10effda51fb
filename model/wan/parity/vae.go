package parity

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/tensor"
)

func init() {
	register("vae_encode", vaeEncode)
	register("vae_decode", vaeDecode)
}

// loadVAE returns the VAE of case.json's args.model_dir (default "vae"), loaded once.
func loadVAE(env *Env, c *Case) (*vae.VAE, error) {
	rel := c.StringArg("model_dir", "vae")
	if filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
		return nil, fmt.Errorf("case %s: model_dir %q is outside the folder", c.Name, rel)
	}
	dir := filepath.Join(env.Folder.Dir, rel)
	variant := c.StringArg("weights_variant", "")
	v, err := env.Cached("vae:"+dir+":"+variant, func() (any, func() error, error) {
		m, err := vae.Load(dir, variant, env.Backend)
		if err != nil {
			return nil, nil, err
		}
		return m, m.Close, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*vae.VAE), nil
}

// vaeEncode is vae.encode(video).latent_dist: moments, mean, logvar, std.
func vaeEncode(_ context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error) {
	m, err := loadVAE(env, c)
	if err != nil {
		return nil, err
	}
	video, err := c.Input("video")
	if err != nil {
		return nil, err
	}
	p, err := m.Encode(video)
	if err != nil {
		return nil, err
	}
	return map[string]*tensor.Dense{"moments": p.Moments, "mean": p.Mean, "logvar": p.LogVar, "std": p.Std}, nil
}

// vaeDecode is vae.decode(latents).sample for every input named latents*; output
// "video<suffix>" for input "latents<suffix>" (latents -> video, latents_1frame ->
// video_1frame).
func vaeDecode(_ context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error) {
	m, err := loadVAE(env, c)
	if err != nil {
		return nil, err
	}
	out := map[string]*tensor.Dense{}
	for name, lat := range c.Inputs {
		suffix, ok := strings.CutPrefix(name, "latents")
		if !ok {
			continue
		}
		v, err := m.Decode(lat)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out["video"+suffix] = v
	}
	return out, nil
}
