// Package unet is Stable Video Diffusion's denoiser, diffusers'
// UNetSpatioTemporalConditionModel, written as a GoMLX graph on top of package nn.
//
// # Contract
//
//   - Build computes, in fp32, what the diffusers module computes
//     (UNetSpatioTemporalConditionModel, checked by model/svd/parity): sample [B, T, Cin, h, w], timestep [B] or [1] (a [1]
//     timestep is broadcast to the batch), encoder_hidden_states [B, S, D] and
//     added_time_ids [B, K] give the prediction [B, T, Cout, h, w]. T, h and w are taken
//     from the input; h and w need not be equal nor multiples of 2^levels (then every
//     upsampler interpolates to the size of its skip connection, as diffusers does).
//   - Every size (levels, channels, heads, layers, transformer depth, cross-attention and
//     added-time widths) comes from Config (config.go: unet/config.json with diffusers' defaults,
//     read with ReadConfig); nothing is hard-coded to SVD-XT.
//   - The tensors the graph reads are named exactly as in the diffusers safetensors file.
//     ExpectedTensors derives that list from the same graph-building code (nn.Declare), so
//     the loader's check and the network can never disagree.
//   - Model is a loaded network bound to a backend; Forward is safe for concurrent use and
//     deterministic (same inputs, bit-identical outputs).
//   - ForwardFrames is Forward for one member of a context-parallel group holding a
//     contiguous slice of the frames: the temporal layers exchange GroupNorm statistics
//     (per frame, added in Forward's order), halo frames and (all-to-all, model/cp)
//     attention tokens through a Comm, the network runs as compiled segments between the
//     exchanges, and the members' outputs joined over frames are Forward's bit for bit
//     where vdpp's CPU kernels run (within 1e-5 relative L2 in fp32 elsewhere).
//   - DeepCache (deepcache.go): ForwardKeep runs the whole network and also returns the
//     feature entering the up-block module that consumes the skip of a branch (Branches
//     counts them); ForwardShallow runs only the layers above that branch with a kept
//     feature in place of everything deeper. On SVD's layout (layers_per_block 2) the
//     branches select the modules DeepCache's own SVD UNet runs (checked by model/svd/parity
//     on the dev-deepcache golden); ForwardFramesKeep / ForwardFramesShallow are their
//     context-parallel forms.
//   - The layer sequence is written once (walk, layers.go), against a small interface:
//     Build applies each layer to graph nodes, ForwardFrames' plan records the same calls
//     as segments and exchanges, and DeepCache's calls are the same walk with the part
//     below a branch dropped (cutLayers). Only the res-blocks and transformers, which mix frames,
//     have a context-parallel form (cp_ops.go); every other layer, and the pieces the
//     two forms share, are the same functions.
//
// Conventions taken from diffusers that are easy to get wrong: the time mixers of the
// UNet weight the spatial branch with alpha = sigmoid(mix_factor); the temporal
// transformer's cross-attention context is the encoder_hidden_states of frame 0; resnet
// GroupNorm eps is 1e-5 in DownBlockSpatioTemporal and the mid block, 1e-6 in the
// cross-attention down block and both up blocks; transformer GroupNorm eps is 1e-6.
package unet
