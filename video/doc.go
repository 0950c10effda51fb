// Package video turns input images into the model tensors of the SVD pipeline and
// decoded frame tensors back into images and files.
//
// Contract: preprocessing is pure and deterministic and reproduces diffusers' rules
// (StableVideoDiffusionPipeline's image preprocessing): VAEInput is PIL's LANCZOS resize (8-bit fixed point,
// horizontal pass first) followed by x/255·2−1; CLIPInput is the pipeline's
// _resize_with_antialiasing (Gaussian blur with reflect padding, then bicubic
// a=−0.75 with align_corners=True) in float32, then CLIP normalisation. FramesFromTensor
// rounds like diffusers' numpy postprocess. File I/O is confined to LoadImage and the
// writers; every file writer writes to a temporary file and renames it into place, so
// an error never leaves a partial file behind. A video can also be written frame by frame
// (PNGFrames, MP4Stream, Histogram with WriteGIFFrames, StatsAccumulator) without holding its
// frames; the files are byte for byte those of the all-at-once writers. Nothing here
// depends on GoMLX.
package video
