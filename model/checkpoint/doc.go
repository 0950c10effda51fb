// Package checkpoint reads a diffusers (or transformers) pipeline folder for any model
// family:
//
//	model_index.json              the components: folder name -> [library, class]
//	<component>/<config file>     config.json, scheduler_config.json (schedulers),
//	                              preprocessor_config.json (image processors), ...
//	<component>/<stem>[.variant].safetensors, or its .safetensors.index.json and shards
//	                              (stem: diffusion_pytorch_model for diffusers, model for
//	                              transformers)
//	vdpp_sampling.json            (optional, vdpp's own: the model's default guidance and decode chunk)
//
// Contract:
//   - The package names no component: a family package names its own (SVD's unet.Component,
//     Wan's wan.Transformer) and each network parses its own config (unet.ReadConfig,
//     transformer.ReadConfig) with Fields, which applies the constructor defaults for absent
//     (or null) keys and reports the first bad key naming the file.
//   - Open reads and checks model_index.json only; configs and weights are read on demand,
//     so a pipeline stage touches only the components it needs. ConfigPath finds a
//     component's config file from its class (ConfigFileName), WeightsPath its weights from
//     its library (WeightsStem) and the variant.
//   - Parsing is pure (Parse* take bytes and a file name); I/O stays in the Checkpoint
//     methods and the Open functions.
//   - Weights stay in their stored dtype until a network asks for them: OpenComponent,
//     OpenDir and OpenFile check a component's weights (one file, or every shard an index
//     names, which must hold exactly the tensors the index assigns to it: ErrShardIndex)
//     against the exact set of names and shapes the network declares, from the headers
//     alone, reporting missing, unexpected, mis-shaped and non-float tensors (the first
//     few, sorted by name) in one *LoadError. The returned Stored keeps the files
//     memory-mapped; Stored.Each converts fp16 / bf16 / fp64 to float32 one tensor at a
//     time into one reused buffer (what nn.NewWeightsStream copies onto a backend) and
//     releases each converted tensor's pages, so host memory holds one float32 tensor, not
//     a float32 copy of the component. Stored.Tensors, LoadDir, LoadComponent and
//     LoadTensors return every tensor as float32 in fresh memory instead.
//   - ReadSampling returns SVD's defaults (DefaultSampling) for a folder without
//     vdpp_sampling.json, and refuses a file with unknown keys or unusable values.
//   - Every error names the file it is about (and the tensor or key when there is one) and
//     wraps one of the package's sentinel errors, matched with errors.Is.
package checkpoint
