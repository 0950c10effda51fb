package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/wire"
)

// runServe is `vdpp serve`: the HTTP job server with K worker processes.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, modelName, inproc, mf, err := parseServeFlags(args, stdout, stderr)
	servedNames := cfg.ServedModelNames
	if err != nil {
		return err
	}
	spec, err := modelSpec(modelName)
	if err != nil {
		return err
	}
	spec.StepMS, spec.Cost, spec.Variant, spec.Backend = cfg.Spec.StepMS, cfg.Spec.Cost, cfg.Spec.Variant, cfg.Spec.Backend
	log := newLogger(stderr)
	spec.LoadProgress = generate.LoadProgress(log) // the text encoder's multi-GB load
	cfg.Spec = spec
	cfg.ServedModelNames = servedModelNames(servedNames, modelName)
	cfg.Log = log
	env, launched, err := launchedRank()
	if err != nil {
		return err
	}
	if launched {
		// One rank of a launched server: rank 0 is the coordinator (HTTP, the job store),
		// every other rank a worker that connects to it at MASTER_ADDR:MASTER_PORT.
		if mf.plan {
			return fmt.Errorf("%w: --plan auto in a launched world: give the --pp and --dp that vdpp plan printed", errUsage)
		}
		secret, err := sharedSecret()
		if err != nil {
			return err
		}
		if env.Rank > 0 {
			log = log.With("rank", env.Rank-1)
			log.Info("serving as a worker", "coordinator", env.MasterHostPort())
			return serve.RunRemoteWorker(ctx, serve.WorkerConfig{Addr: env.MasterHostPort(), Rank: env.Rank - 1, Secret: secret,
				Spec: spec, HeartbeatTimeout: cfg.HeartbeatTimeout, Log: log})
		}
		if mf.given && cfg.NProc != env.WorldSize-1 {
			return fmt.Errorf("%w: the mesh %v has %d worker ranks, but a launched world of %d ranks has %d workers (rank 0 coordinates)", errUsage, cfg.Mesh, cfg.NProc, env.WorldSize, env.WorldSize-1)
		}
		if !mf.given {
			cfg.NProc, cfg.Mesh = env.WorldSize-1, comm.Mesh{PP: env.WorldSize - 1, CFG: 1, CP: 1, DP: 1}
		}
		cfg.Launcher, cfg.Secret = serve.RemoteLauncher{}, secret
		cfg.WorkerListen = env.ListenAddr()
	}
	cfg.WorkerOutput = stderr
	if mf.plan {
		if cfg.Mesh, err = serveAutoMesh(ctx, modelName, cfg, mf.goal, log); err != nil {
			return err
		}
	}
	if inproc {
		cfg.Launcher = serve.InProcLauncher{Spec: spec, Log: log}
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", srv.Addr())
	log.Info("serving", "model", spec.Name, "dir", spec.Dir, "nproc", cfg.NProc, "mesh", cfg.Mesh.String(), "data_dir", cfg.DataDir, "keep_jobs", cfg.KeepJobs)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-srv.Err():
	}
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return err
}

// serveMeshFlags are what serve's mesh flags ask for beyond the Config.
type serveMeshFlags struct {
	// given: --nproc or a mesh degree was given.
	given bool
	// plan: --plan auto, for Config.NProc devices and the planner goal goal.
	plan bool
	goal string
}

// parseServeFlags parses `vdpp serve`'s flags into a Config (the model still to be
// resolved from the returned --model value), --in-process and the mesh flags.
func parseServeFlags(args []string, stdout, stderr io.Writer) (cfg serve.Config, modelName string, inproc bool, mf serveMeshFlags, err error) {
	fs := newFlags("serve", stdout, stderr)
	lim := job.DefaultLimits()
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "HTTP listen address (port 0 picks a free one); without a token keep it on loopback")
	fs.StringVar(&cfg.Token, "api-token", os.Getenv("VDPP_API_TOKEN"), "bearer token required on every API call (default $VDPP_API_TOKEN)")
	fs.StringVar(&cfg.DataDir, "data-dir", "vdpp-data", "folder of the job database and outputs")
	fs.StringVar(&modelName, "model", "builtin", "the model `NAME|DIR`: builtin (SVD), builtin-wan (Wan, prompts), a diffusers folder (its model_index.json picks the family), ORG/NAME[@REV] from the Hugging Face cache, or synthetic (the stand-in, for tests)")
	fs.StringVar(&cfg.Spec.Variant, "variant", "", `checkpoint weights variant, e.g. "fp16" (converted to float32)`)
	fs.StringVar(&cfg.Spec.Backend, "backend", "", "GoMLX backend of the checkpoint model (default: GOMLX_BACKEND or go)")
	fs.Float64Var(&cfg.Spec.StepMS, "step-ms", 1, "synthetic model: cost of one sample-step in ms")
	fs.StringVar(&cfg.Spec.Cost, "cost", "sleep", "synthetic model: sleep or spin")
	fs.IntVar(&cfg.NProc, "nproc", 0, "worker ranks: alone, a pipeline of that many stages; with --pp --cfg --cp --dp, their product (checked) (0: 2, or the mesh's)")
	var pp, cfgDeg, cp, dp int
	fs.IntVar(&pp, "pp", 0, "pipeline stages of each replica (mesh: pp x cfg x cp x dp worker ranks; unset: what --nproc leaves)")
	fs.IntVar(&cfgDeg, "cfg", 0, "CFG-parallel degree: 2 runs each stage on a pair of ranks, the unconditional and conditional halves of guided jobs (unguided jobs are then refused)")
	fs.IntVar(&cp, "cp", 0, "context-parallel degree: each stage's ranks split a job's latent frames over this many ranks (jobs with fewer latent frames, or cut into windows, are then refused)")
	fs.IntVar(&dp, "dp", 0, "data-parallel replicas: this many pipelines share the jobs, each batch going to the least busy one")
	var planName string
	fs.StringVar(&planName, "plan", "", `"auto": the planner picks the pp x dp mesh for --nproc devices (default 2) and the model's native job, as vdpp plan does`)
	fs.StringVar(&mf.goal, "goal", "throughput", "planner goal for --plan auto: throughput or latency")
	fs.IntVar(&cfg.MaxBatch, "max-batch", 0, "samples per denoiser call (0: 4 for synthetic, 1 for a checkpoint, whose rows are not guaranteed bit-independent)")
	fs.IntVar(&cfg.MaxQueue, "max-queue", 64, "places of the queue of jobs waiting for a slot, shared between clients (an API key, else an address): each may hold its share, one at least; beyond it a client gets 429 (at most twice this many wait in all)")
	fs.DurationVar(&cfg.DefaultBudget, "default-budget", serve.DefaultBudget, "on a CPU backend, the predicted time a job that leaves its size, length and steps out may take: the web page's and a bare OpenAI create's defaults are the largest that fit it and the memory (negative: memory only)")
	fs.IntVar(&cfg.MaxPrepares, "max-prepares", 0, "jobs prepared at once (image decode and resize, conditioning) beside the denoising (0: half the cores, 1 to 4)")
	fs.IntVar(&cfg.MaxRunning, "max-running", 0, "jobs in the pipelines at once (default 2*max-batch per stage of every replica)")
	fs.IntVar(&cfg.MaxRestarts, "max-restarts", 100, "restarts allowed per worker rank")
	lim.MaxFrames = 0
	fs.IntVar(&lim.MaxFrames, "max-frames", 0, "largest num_frames accepted (0: derived, --max-cost-multiple times the model's native frame count, at least 25: 56 for builtin, 324 for Wan)")
	fs.IntVar(&lim.MaxResolution, "max-resolution", lim.MaxResolution, "largest height or width accepted")
	fs.IntVar(&lim.MaxSteps, "max-steps", lim.MaxSteps, "largest steps accepted")
	fs.Float64Var(&cfg.CostMultiple, "max-cost-multiple", job.DefaultCostMultiple, "a job may cost this many times the model's native job (its default size, frames and steps): in pixels, in pixels x frames x steps, and in a step's estimated working memory (negative: no cost limits)")
	fs.Func("max-memory", "memory the jobs' working sets and the weights share, in bytes or with a unit (64GiB, 512MiB): a job whose step or decode needs more than its share is refused 413 (default: the host's memory, or the cgroup's limit; give the GPU's for a device backend; -1: no memory limit)", func(v string) error {
		n, err := parseBytes(v)
		cfg.MaxMemory = n
		return err
	})
	fs.Func("min-free-space", "free disk space the data dir keeps, in bytes or with a unit (2GiB): a submission whose outputs would leave less is refused 507 up front and /readyz answers 503 below it (default: room for four of the model's native jobs, at least 256MiB; -1: no check)", func(v string) error {
		n, err := parseBytes(v)
		cfg.MinFreeBytes = n
		return err
	})
	fs.Int64Var(&cfg.MaxPixels, "max-pixels", 0, "largest height x width accepted (0: derived, --max-cost-multiple times the model's native pixels)")
	fs.Int64Var(&lim.MaxBodyBytes, "max-body-bytes", lim.MaxBodyBytes, "largest request body")
	lim.MaxImagePixels = 0
	fs.IntVar(&lim.MaxImagePixels, "max-image-pixels", 0, "largest input image, in width x height pixels (0: derived, 16 times the model's native pixels and at least a megapixel: preparing a job filters every input pixel, one job at a time)")
	fs.IntVar(&cfg.Conns.Max, "max-conns", 0, "HTTP connections held at once; more are answered 503 and closed (0: from the file-descriptor limit, leaving a quarter and at least 256 for the store and workers, at most 4096)")
	fs.IntVar(&cfg.Conns.PerClient, "max-conns-per-client", 0, "HTTP connections one client IP address may hold (0: a quarter of --max-conns)")
	fs.StringVar(&cfg.PidFile, "worker-pid-file", "", "write 'RANK PID' of every live worker here (fault tests)")
	fs.StringVar(&cfg.HoldFile, "test-hold-file", "", "while this file exists, hold every job at its first step: workers' later reports wait (tests of cancel and of a running job)")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", wire.DefaultHeartbeatTimeout, "a worker silent this long is declared dead")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", 60*time.Second, "a worker holding a batch without finishing a step this long is restarted (negative: never)")
	fs.DurationVar(&cfg.KeepJobs, "keep-jobs", job.DefaultKeepJobs, "delete a finished job (record, input, latent, videos) this long after it finished; 0 keeps jobs forever")
	fs.Func("served-model-name", "the model name(s) the OpenAI API answers to, comma-separated; the first is reported (default: the --model value, a folder's base name)", func(v string) error {
		cfg.ServedModelNames = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				cfg.ServedModelNames = append(cfg.ServedModelNames, n)
			}
		}
		if len(cfg.ServedModelNames) == 0 {
			return fmt.Errorf("no name in %q", v)
		}
		return nil
	})
	fs.BoolVar(&inproc, "in-process", false, "run the workers as goroutines of this process instead of child processes")
	if err := parseFlags(fs, args); err != nil {
		return cfg, "", false, mf, err
	}
	if cfg.KeepJobs < 0 {
		return cfg, "", false, mf, fmt.Errorf("%w: --keep-jobs %v: must be 0 (keep jobs forever) or positive", errUsage, cfg.KeepJobs)
	}
	for _, name := range []string{"nproc", "pp", "cfg", "cp", "dp"} {
		mf.given = mf.given || fs.Given(name)
	}
	if fs.Given("plan") {
		switch {
		case planName != "auto":
			return cfg, "", false, mf, fmt.Errorf("%w: --plan %q: only \"auto\" is known", errUsage, planName)
		case pp != 0 || cfgDeg != 0 || cp != 0 || dp != 0:
			return cfg, "", false, mf, fmt.Errorf("%w: --plan auto chooses --pp and --dp itself; give only --nproc (the devices)", errUsage)
		}
		if _, err := plan.ParseGoal(mf.goal); err != nil {
			return cfg, "", false, mf, fmt.Errorf("%w: --goal: %w", errUsage, err)
		}
		if cfg.NProc == 0 {
			cfg.NProc = 2
		}
		mf.plan = true
		cfg.Limits = lim
		return cfg, modelName, inproc, mf, nil
	}
	mesh, err := comm.MeshFromFlags(cfg.NProc, pp, cfgDeg, cp, dp, 2)
	if err != nil {
		return cfg, "", false, mf, fmt.Errorf("%w: %w", errUsage, err)
	}
	if mesh.CFG > 2 {
		return cfg, "", false, mf, fmt.Errorf("%w: --cfg %d: classifier-free guidance has two halves (use 1 or 2)", errUsage, mesh.CFG)
	}
	cfg.Mesh, cfg.NProc = mesh, mesh.Size()
	cfg.Limits = lim
	return cfg, modelName, inproc, mf, nil
}

// sharedSecret reads the secret every rank of a launched server shares: workers on other
// nodes present it to the coordinator.
func sharedSecret() ([]byte, error) {
	v := os.Getenv(wire.SecretEnv)
	secret, err := hex.DecodeString(v)
	if v == "" || err != nil || len(secret) != wire.SecretLen {
		return nil, fmt.Errorf("%w: vdpp serve across several processes of a launched world needs $%s: %d hex digits, the same on every rank (e.g. openssl rand -hex %d)",
			errUsage, wire.SecretEnv, 2*wire.SecretLen, wire.SecretLen)
	}
	return secret, nil
}

// errBuiltinUnavailable is the answer to --model builtin in a build without the built-in
// trained model.
var errBuiltinUnavailable = errors.New("serve: builtin model not available in this build")

// resolveBuiltin maps a built-in model's name ("builtin", "builtin-wan") to its folder (a
// variable so tests can swap it; nil means a build without built-in models).
var resolveBuiltin = builtin.Resolve

// modelSpec maps --model to a ModelSpec: a folder, a built-in model or a Hugging Face model id in
// the local cache (a family's model with that folder), or a registered name ("synthetic").
func modelSpec(name string) (serve.ModelSpec, error) {
	if _, ok := builtin.Lookup(name); ok {
		if resolveBuiltin == nil {
			return serve.ModelSpec{}, errBuiltinUnavailable
		}
		dir, err := resolveBuiltin(name)
		if err == nil {
			dir, err = filepath.Abs(dir)
		}
		if err != nil {
			return serve.ModelSpec{}, fmt.Errorf("serve: built-in model %s: %w", name, err)
		}
		return folderSpec(name, dir)
	}
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		abs, err := filepath.Abs(name)
		if err != nil {
			return serve.ModelSpec{}, fmt.Errorf("serve: model folder %s: %w", name, err)
		}
		return folderSpec(name, abs)
	}
	if family.IsHFName(name) {
		dir, err := family.ResolveHF(name, os.Getenv)
		if err != nil {
			return serve.ModelSpec{}, fmt.Errorf("%w: --model %w", errUsage, err)
		}
		return folderSpec(name, dir)
	}
	if name == "" {
		return serve.ModelSpec{}, fmt.Errorf("%w: --model is empty", errUsage)
	}
	return serve.ModelSpec{Name: name}, nil
}

// folderSpec is the ModelSpec of the model folder dir (--model name), of the family its
// model_index.json names (its family's defaults, the folder's sampling defaults included,
// are what a job gets when its JSON leaves them out).
func folderSpec(name, dir string) (serve.ModelSpec, error) {
	// A vdpp_sampling.json the family would refuse at load is refused now, named.
	if _, err := builtin.Sampling(name); err != nil {
		return serve.ModelSpec{}, fmt.Errorf("serve: %w", err)
	}
	// The folder's model_index.json names its family; a folder that does not is refused
	// with the loader's one line (what is missing or unreadable).
	m, err := family.ResolveDir(dir)
	if err != nil {
		return serve.ModelSpec{}, fmt.Errorf("serve: --model %s: %w", name, err)
	}
	fam := m.Family.Name()
	// A text-to-video family's jobs give prompts, which the coordinator encodes: the
	// folder must have its text encoder and tokenizer.
	if d, err := m.Describe(); err == nil && d.TextDim > 0 {
		if err := m.Preflight(family.Options{Roles: family.Roles{Condition: true}, Prompts: true}); err != nil {
			return serve.ModelSpec{}, fmt.Errorf("%w: --model %s is a text-to-video model (%s): serving it needs its text encoder to encode the jobs' prompts: %w", errUsage, name, fam, err)
		}
	}
	return serve.ModelSpec{Name: fam, Dir: dir}, nil
}

// runServeWorker is `vdpp worker serve`: one worker rank of a server (started by it).
func runServeWorker(ctx context.Context, args []string, stderr io.Writer, rank int) error {
	fs := newFlags("worker serve", stderr, stderr)
	var cfg serve.WorkerConfig
	fs.StringVar(&cfg.Addr, "connect", "", "the server's worker address")
	fs.IntVar(&cfg.Rank, "rank", rank, "this worker's rank")
	fs.StringVar(&cfg.Spec.Name, "model", "synthetic", "model name")
	fs.StringVar(&cfg.Spec.Dir, "model-dir", "", "checkpoint folder")
	fs.StringVar(&cfg.Spec.Variant, "variant", "", "checkpoint weights variant")
	fs.StringVar(&cfg.Spec.Backend, "backend", "", "GoMLX backend")
	fs.Float64Var(&cfg.Spec.StepMS, "step-ms", 1, "synthetic model: cost of one sample-step in ms")
	fs.StringVar(&cfg.Spec.Cost, "cost", "sleep", "synthetic model: sleep or spin")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", wire.DefaultHeartbeatTimeout, "give up on a silent server after this")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	secret, err := hex.DecodeString(os.Getenv(wire.SecretEnv))
	if err != nil || len(secret) != wire.SecretLen {
		return fmt.Errorf("worker serve: $%s must hold the server's secret", wire.SecretEnv)
	}
	cfg.Secret = secret
	cfg.Heartbeat = time.Duration(0)
	cfg.Log = newLogger(stderr).With("rank", cfg.Rank)
	return serve.RunWorker(ctx, cfg)
}

// servedModelNames are the OpenAI API's names of the served model: --served-model-name
// when given, else the --model value (a folder's base name).
func servedModelNames(flagNames []string, modelName string) []string {
	if len(flagNames) > 0 {
		return flagNames
	}
	if _, err := os.Stat(modelName); err != nil && family.IsHFName(modelName) {
		return []string{modelName} // a Hugging Face id is the model's name as clients know it
	}
	return []string{filepath.Base(filepath.Clean(modelName))}
}

// parseBytes reads a byte count: digits with an optional unit (B, KiB, MiB, GiB, TiB, or
// KB, MB, GB, TB in powers of 1000); a negative count is kept (it switches a limit off).
func parseBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	units := []struct {
		suffix string
		mul    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mul = strings.TrimSpace(rest), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || (n > 0 && n > math.MaxInt64/mul) {
		return 0, fmt.Errorf("%q is not a byte count (e.g. 64GiB, 512MiB, 1000000)", v)
	}
	return n * mul, nil
}
