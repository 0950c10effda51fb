// Package vae is Stable Video Diffusion's AutoencoderKLTemporalDecoder (diffusers) in GoMLX:
// the KL image encoder, which maps images [N, 3, H, W] in [-1, 1] to the diagonal Gaussian
// posterior over latents [N, latent, H/f, W/f] (f = 2^(levels-1)), and the temporal decoder,
// which maps the latents of one video's frames [F, latent, h, w] to frames [F, 3, h·f, w·f].
//
// # Contract
//
//   - Every size comes from Config (config.go: vae/config.json, read with ReadConfig:
//     levels, block channels, latent channels, layers per block); nothing is hard-coded to the SVD release, and images need
//     not be square.
//   - The networks compute what the reference (diffusers v0.31 AutoencoderKLTemporalDecoder)
//     computes in fp32: Encode returns the quant_conv moments, mean, logvar clamped to
//     [-30, 20] and std = exp(logvar/2) (the mode is the mean; there is no post_quant_conv);
//     Decode(z, chunk) equals vae.decode(z, num_frames=F) when chunk <= 0 or chunk >= F, and
//     otherwise decodes consecutive chunks of chunk frames (the last one shorter) with
//     num_frames = the chunk's length and concatenates them, as the SVD pipeline does with
//     decode_chunk_size. No scaling factor is applied here.
//   - ExpectedTensors lists exactly the tensors (names and shapes of the diffusers
//     state_dict) that the networks read; it is derived from the same graph-building code,
//     so the two cannot disagree. Loaders check files against it.
//   - A Model may hold only the encoder or only the decoder (LoadParts), so a pipeline
//     stage loads only what it runs; calling the missing half returns ErrNoEncoder or
//     ErrNoDecoder.
//   - DecodeChunks is Decode a group of chunks at a time, handing each group's frames to a
//     callback before the next group runs (bit-equal to Decode), so a long video's frames
//     need not be held together.
//   - WithTiling returns the model decoding and encoding in overlapping spatial tiles with
//     the scheme of diffusers' AutoencoderKL.tiled_decode / _tiled_encode (the temporal
//     decoder has none of its own): memory follows the tile, and the result differs from
//     the untiled one where tiles meet. A frame no larger than a tile is not tiled.
//   - A Model is safe for concurrent use.
package vae
