package svdgen

import (
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/serve"
)

// ToSVD maps a job's parameters to the pipeline's.
func ToSVD(p serve.Params) svd.Params {
	return svd.Params{
		NumFrames: p.NumFrames, Steps: p.Steps, Height: p.Height, Width: p.Width,
		MinGuidance: p.MinGuidance, MaxGuidance: p.MaxGuidance, FPS: p.FPS, MotionBucketID: p.MotionBucketID,
		NoiseAugStrength: p.NoiseAugStrength, DecodeChunkSize: p.DecodeChunkSize, Seed: p.Seed,
	}
}

// FromSVD maps the pipeline's parameters to a job's.
func FromSVD(p svd.Params) serve.Params {
	return serve.Params{
		NumFrames: p.NumFrames, Steps: p.Steps, Height: p.Height, Width: p.Width,
		MinGuidance: p.MinGuidance, MaxGuidance: p.MaxGuidance, FPS: p.FPS, MotionBucketID: p.MotionBucketID,
		NoiseAugStrength: p.NoiseAugStrength, DecodeChunkSize: p.DecodeChunkSize, Seed: p.Seed,
	}
}
