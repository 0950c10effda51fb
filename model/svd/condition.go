package svd

import (
	"fmt"
	"image"
	"math/rand/v2"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// Conditioning keys handed from stage 0 to every stage with a sample.
const (
	KeyImageEmbeddings = "image_embeddings" // [1, 1, D]
	KeyImageLatents    = "image_latents"    // [1, C, h, w] (not scaled by scaling_factor)
	KeyAddedTimeIDs    = "added_time_ids"   // [1, 3]
)

// Noise draws a sample's noise: augmentation noise [1,3,H,W] first, then the initial latent
// noise [1,T,C,h,w] (unscaled), from a PCG stream keyed by (seed, sample).
func (p *Pipeline) Noise(pr Params, sample int64) (aug, init *tensor.Dense) {
	r := rand.New(rand.NewPCG(uint64(pr.Seed), uint64(sample)))
	aug = tensor.New(1, 3, pr.Height, pr.Width)
	for i := range aug.Data {
		aug.Data[i] = float32(r.NormFloat64())
	}
	init = tensor.New(append([]int{1}, p.LatentShape(pr)...)...)
	for i := range init.Data {
		init.Data[i] = float32(r.NormFloat64())
	}
	return aug, init
}

// Preprocess turns an image into the CLIP input (antialiased resize of the original image to
// the encoder's size, normalised) and the VAE input (plain resize to W x H, in [-1, 1]).
func (p *Pipeline) Preprocess(img image.Image, pr Params) (clipPixels, vaeImage *tensor.Dense, err error) {
	mean, std := video.CLIPMean, video.CLIPStd
	if len(p.Features.ImageMean) == 3 && len(p.Features.ImageStd) == 3 {
		for c := 0; c < 3; c++ {
			mean[c], std[c] = float32(p.Features.ImageMean[c]), float32(p.Features.ImageStd[c])
		}
	}
	if clipPixels, err = video.CLIPInput(img, p.CLIPConfig.ImageSize, mean, std); err != nil {
		return nil, nil, err
	}
	if vaeImage, err = video.VAEInput(img, pr.Width, pr.Height); err != nil {
		return nil, nil, err
	}
	return clipPixels, vaeImage, nil
}

// Conditioned is the result of Condition: the tensors every stage needs, plus the
// intermediate values the parity check compares.
type Conditioned struct {
	Cond           model.Conditioning
	ImageEmbeds    *tensor.Dense // [1, D]
	AugmentedImage *tensor.Dense // [1, 3, H, W]
	ImageLatents   *tensor.Dense // [1, C, h, w]
	AddedTimeIDs   *tensor.Dense // [1, 3]
}

// Condition computes one sample's conditioning from preprocessed inputs, as diffusers does:
// CLIP image embedding; image + noise_aug_strength * aug noise; VAE encode, mode (no
// scaling); added_time_ids = [fps - 1, motion_bucket_id, noise_aug_strength].
func (p *Pipeline) Condition(clipPixels, vaeImage, augNoise *tensor.Dense, pr Params) (Conditioned, error) {
	if p.CLIP == nil || p.VAEEnc == nil {
		return Conditioned{}, fmt.Errorf("svd: this process did not load the image encoder and VAE encoder")
	}
	embeds, _, err := p.CLIP.Forward(clipPixels)
	if err != nil {
		return Conditioned{}, fmt.Errorf("svd: image encoder: %w", err)
	}
	if !tensor.SameShape(vaeImage, augNoise) {
		return Conditioned{}, fmt.Errorf("svd: image %v and augmentation noise %v differ in shape", vaeImage.Shape, augNoise.Shape)
	}
	aug := vaeImage.Clone()
	s := float32(pr.NoiseAugStrength)
	for i := range aug.Data {
		aug.Data[i] = aug.Data[i] + s*augNoise.Data[i]
	}
	enc, err := p.vaeFor(p.VAEEnc, pr)
	if err != nil {
		return Conditioned{}, err
	}
	post, err := enc.Encode(aug)
	if err != nil {
		return Conditioned{}, fmt.Errorf("svd: VAE encode: %w", err)
	}
	ids := &tensor.Dense{Shape: []int{1, 3}, Data: []float32{float32(pr.FPS - 1), float32(pr.MotionBucketID), float32(pr.NoiseAugStrength)}}
	d := embeds.Shape[len(embeds.Shape)-1]
	emb3 := &tensor.Dense{Shape: []int{1, 1, d}, Data: embeds.Data}
	return Conditioned{
		Cond:           model.Conditioning{KeyImageEmbeddings: emb3, KeyImageLatents: post.Mode(), KeyAddedTimeIDs: ids},
		ImageEmbeds:    embeds,
		AugmentedImage: aug,
		ImageLatents:   post.Mode(),
		AddedTimeIDs:   ids,
	}, nil
}
