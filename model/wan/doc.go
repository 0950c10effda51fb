// Package wan is the Wan 2.x video model family (diffusers WanPipeline,
// WanImageToVideoPipeline): a diffusion transformer denoiser, one or two of them (Wan 2.2's
// high-noise and low-noise experts), a causal 3D VAE and flow-matching schedulers.
//
// The package registers the "wan" family with model/family (Sampler, Load): generate, bench,
// plan and parity run a WanPipeline folder through it. The first stage takes prompt
// embeddings (family.Input.PromptEmbeds, until the text encoder is wired) and draws each
// sample's initial noise in diffusers' [C, F, h, w] order from the stream keyed by (seed,
// sample); every stage runs the experts its steps use (expert 1 while t >= boundary, expert
// 2 after, as WanPipeline compares in float32) with CFG uncond + g·(cond − uncond), g being
// guidance_scale for expert 1 and guidance_scale_2 for expert 2, and the folder's scheduler
// (UniPC or flow-match Euler, whose history travels in the hand-off); the last stage
// denormalises with latents_mean/std and decodes with the causal VAE to frames in [0, 1].
// The family's stage plans put a boundary at the expert switch (Switches), so a pipeline
// stage loads one expert where data parallelism needs both.
//
// Each expert's Denoiser offers diffusers' First Block Cache (model.StepCacher,
// model.FrameStepCacher; modes "fbcache" and "static", see Caching and docs/caching.md):
// block 0 always runs, the remaining blocks only when block 0's residual moved more than
// the threshold from the last computed call's, per sample, expert and CFG branch.
//
// This package reads a diffusers Wan folder (Open): model_index.json names the pipeline
// class and the components, `boundary_ratio` (when set, `transformer` denoises the steps
// with t >= boundary_ratio·num_train_timesteps and `transformer_2` the rest) and
// `expand_timesteps` (Wan 2.2 TI2V: one timestep per token). The networks live in
// subpackages: model/wan/transformer (WanTransformer3DModel); model/wan/parity checks them
// against reference cases.
//
// # Contract
//
// Open checks the folder's structure before anything is loaded, and a folder that cannot
// run is one error wrapping ErrFolder that names the file and what is wrong: a pipeline
// class that is not Wan's, a missing transformer, boundary_ratio set while transformer_2
// is missing (or not listed), a boundary_ratio outside [0, 1]. Nothing about sizes is
// assumed: each component's config.json gives them.
package wan
