// Package train trains vdpp's built-in model: a small Stable Video Diffusion (the same
// UNetSpatioTemporalConditionModel, AutoencoderKLTemporalDecoder and
// CLIPVisionModelWithProjection code as the real checkpoint, with the configs of Configs)
// on the procedural dataset (data/procedural), with GoMLX's autodiff and Adam.
//
// Training has two phases. PhaseVAE trains the autoencoder on 14-frame clips (every frame
// encoded, a posterior sample decoded by the temporal decoder with num_frames = 14):
// L1 + MSE reconstruction plus a small KL term. PhaseUNet freezes the VAE and the image
// encoder (a fixed random CLIP, see Configs) and trains the UNet with SVD's EDM objective in
// v-prediction form: ln σ ~ N(PMean, PStd), x = x0 + σ·n, the network sees c_in·x =
// x/√(σ²+1) with timestep 0.25·ln σ and must output F with x0 = c_skip·x + c_out·F,
// c_skip = 1/(σ²+1), c_out = −σ/√(σ²+1) — exactly what sched's Euler v-prediction step
// assumes — under the EDM weight (σ²+1)/σ², i.e. a plain MSE on F. The conditioning is
// built as the pipeline builds it: the CLIP embedding of frame 0, the VAE mode of
// frame 0 + 0.02·ε (not scaled), added_time_ids [6, 127, 0.02]; with probability
// CondDropout both the embedding and the image latents are zeroed (the pipeline's
// unconditional rows), which classifier-free guidance needs.
//
// # Data parallelism
//
// RunRank trains as one rank of several (Peers: the all-gather and barrier of a
// comm.Group, whose TCP transport's heartbeats end the run within seconds, naming the rank,
// when one dies or stops). A step's batch of Options.Batch clips is cut into microbatches of
// Options.MicroBatch; rank r of N computes the gradients of microbatches [r·M/N,
// (r+1)·M/N) (gradient accumulation when that is more than one), the ranks exchange them
// and every rank sums all M along one binary tree fixed by M (sumTree), then takes the
// same Adam and EMA step. Every rank's state is compared with rank 0's every CheckEvery
// steps and at checkpoints (ErrDiverged names the rank that differs); rank 0 writes the
// checkpoints (atomically, after the ranks agreed on the state hash it records), the loss
// log and the progress.
//
// Contract: a run is a pure function of its Options and the step it resumes from, and not
// of the number of ranks: the batch of step k is drawn from a PCG stream keyed by (seed,
// phase, k), example by example in order (a rank replays the draws of the examples it does
// not build), and the gradient is summed along the same tree however the microbatches are
// spread, so 1, 2 or 4 ranks give the same bits for the same Batch and MicroBatch. A
// resumed run continues bit for bit where a checkpoint left it: the checkpoint holds every
// weight, the EMA, the Adam moments and counters and the step (the data cursor; there is
// no other random state to save), and its recorded state hash is checked on load. The
// learning rate of step k is LRAt(o, k). I/O (checkpoints, the loss log, progress) lives
// in RunRank's loop (steps.go: a run's step, evaluate, check and checkpoint, and record);
// the step functions are deterministic given their inputs. Training graphs are built
// without nn.Program, so they never get the fused CPU ops, which have no gradient.
//
// # The command
//
// Command is `vdpp train`'s flags (RegisterFlags, and Args, which renders them from the
// flag set for the training benchmark's runs, bench.Train): the run's Options and what the
// command does around it. Resolve refuses a mistake before anything is written; Launch
// starts the local data-parallel processes and RunLaunched is one rank of them; Report and
// WriteSummary are what the command prints and writes.
package train
