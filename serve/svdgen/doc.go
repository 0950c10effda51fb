// Package svdgen is the Stable Video Diffusion edge of `vdpp serve`: a serve.Generator
// that conditions a job on its image with the checkpoint's CLIP image encoder and VAE
// encoder and decodes its final latent with the VAE decoder, registered for the model name
// "svd" (a diffusers checkpoint folder; `--model builtin` resolves to one). The coordinator
// holds this Generator; the workers hold only the UNet, through the "svd" model that
// package model/svd registers (model.New with the spec's folder, variant and backend).
//
// Contract: a job is exactly one sample of `vdpp generate` with the same parameters, sample
// index 0 and micro-batch 1: Prepare makes the same svd calls in the same order —
// Noise(params, 0), Preprocess, Condition, initial noise times init_noise_sigma, guidance
// weights from sched.GuidanceWeights — and Decode is svd.Decode then svd.ToUnit, so the same
// seed gives bit-identical latents and frames (on the same backend). The encoders and the
// decoder are used by one call at a time. Parameters the checkpoint cannot serve (sizes
// that are not multiples of its VAE factor, min guidance above max guidance) are refused
// with serve.ErrBadParams, which the server answers with 400.
package svdgen
