// Package vae is Wan's causal 3D video autoencoder, diffusers' AutoencoderKLWan (v0.35.2),
// in GoMLX: the Wan 2.1 VAE (used by Wan 2.1 and Wan 2.2 A14B) and the Wan 2.2 TI2V
// variant (residual blocks with AvgDown3D / DupUp3D shortcuts, patch size 2).
//
// # Contract
//
//   - Every size comes from vae/config.json (Config): base and decoder widths, z_dim,
//     dim_mult, num_res_blocks, temperal_downsample, in/out channels, is_residual,
//     patch_size. Frames need not be square. Videos are [B, C, F, H, W] in [-1, 1], latents
//     [B, z, f, h, w] with f = 1 + (F−1)/T, h = H/S, w = W/S (T = Config.TemporalFactor,
//     S = Config.SpatialFactor).
//   - Encode equals diffusers' vae.encode(video).latent_dist: the encoder runs on frame 0
//     alone, then on chunks of 4 frames, each causal convolution keeping the last 2 frames
//     it saw as its left context; it returns the quant_conv moments, mean, logvar clamped
//     to [-30, 20] and std = exp(logvar/2). The video must have 1 + 4k frames (ErrFrames);
//     diffusers silently drops the frames past the last whole chunk.
//   - Decode equals vae.decode(latents).sample: post_quant_conv, then the decoder once per
//     latent frame with the same caches (latent frame 0 gives one frame, every later one
//     T frames), unpatchify, and the clamp to [-1, 1]. No latents_mean / latents_std are
//     applied here: Config.Normalize and Config.Denormalize do what the Wan pipelines do.
//   - EncodeChunk / DecodeFrame take the cache explicitly, so a caller streams a video of
//     any length at the memory of one chunk (DecodeStream hands each decoded chunk to a
//     callback); the concatenated chunks equal Encode / Decode.
//   - With Options.Tiling the frames are cut into overlapping spatial tiles exactly as
//     diffusers' enable_tiling does (tiled_encode / tiled_decode: same tile grid, linear
//     blends of the upper and left neighbours in raster order, and, like diffusers, no
//     clamp after a tiled decode). Tiling applies only when a frame is larger than one
//     tile, as in diffusers. The TI2V variant refuses tiling (ErrTiling): v0.35.2's tiled
//     path skips its patchify / unpatchify.
//   - ExpectedTensors lists exactly the tensors (diffusers state_dict names and shapes) the
//     networks read; loading checks the weights file against it and names what is missing.
//   - A VAE is safe for concurrent use; a cache value belongs to one stream.
package vae
