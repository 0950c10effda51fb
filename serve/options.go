package serve

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/wire"
)

// ErrOptions marks options `vdpp serve` refuses before it starts; it is a command-line
// mistake (cli.ErrUsage).
var ErrOptions = fmt.Errorf("serve: bad options: %w", cli.ErrUsage)

// badOptions is an error about the options, ErrOptions, whose message is fmt.Errorf's.
func badOptions(format string, a ...any) error { return cli.Errorf(ErrOptions, format, a...) }

// Options are the flags of `vdpp serve`. Config turns them into a server's Config (the
// model still to be resolved: ResolveModelSpec of Model).
type Options struct {
	Listen string
	// Token is the bearer token every API call must present; "" reads $VDPP_API_TOKEN
	// (TokenEnv) when Config is given a getenv.
	Token   string
	DataDir string
	// Model is the --model value (ResolveModelSpec); Variant, Backend, StepMS and Cost are
	// the ModelSpec's.
	Model   string
	Variant string
	Backend string
	StepMS  float64
	Cost    string
	// Weights are the load options of the model's weights (--weights-dtype and the files).
	Weights family.WeightOptions
	// LoRADir is the folder of the LoRA files jobs may name (--lora-dir; "" takes none).
	LoRADir string
	// NProc and the mesh degrees lay out the worker ranks as generate's flags do (0: a
	// pipeline of 2, or the mesh's product); Plan "auto" leaves the pp x dp mesh of NProc
	// devices (default 2) to the planner, for Goal.
	NProc           int
	PP, CFG, CP, DP int
	Plan            string
	Goal            string
	MaxBatch        int
	MaxQueue        int
	MaxPrepares     int
	// DefaultBudget bounds, on a CPU backend, the predicted time of the defaults a job
	// that leaves its size, length and steps out gets (negative: memory only).
	DefaultBudget time.Duration
	MaxRunning    int
	MaxRestarts   int
	// Limits are the job limits; MaxFrames and MaxImagePixels 0 are derived from the model.
	Limits       job.Limits
	CostMultiple float64
	// MaxMemory, MinFreeBytes and MaxPixels are byte and pixel counts (Config's).
	MaxMemory         int64
	MinFreeBytes      int64
	MaxPixels         int64
	MaxConns          int
	MaxConnsPerClient int
	PidFile           string
	HoldFile          string
	HeartbeatTimeout  time.Duration
	StallTimeout      time.Duration
	KeepJobs          time.Duration
	// ServedModelNames are the OpenAI API's names of the model (nil: the --model value,
	// see ServedNames).
	ServedModelNames []string
	// InProcess runs the workers as goroutines of the server's process.
	InProcess bool
}

// TokenEnv is the environment variable that holds the API token when --api-token is not
// given.
const TokenEnv = "VDPP_API_TOKEN"

// DefaultOptions are `vdpp serve`'s defaults: the built-in model on a 2-stage pipeline,
// listening on loopback.
func DefaultOptions() Options {
	lim := job.DefaultLimits()
	lim.MaxFrames, lim.MaxImagePixels = 0, 0 // derived from the model
	return Options{Listen: "127.0.0.1:8080", DataDir: "vdpp-data", Model: "builtin", StepMS: 1, Cost: "sleep",
		Goal: "throughput", MaxQueue: 64, DefaultBudget: DefaultBudget, MaxRestarts: 100, Limits: lim, CostMultiple: job.DefaultCostMultiple,
		HeartbeatTimeout: wire.DefaultHeartbeatTimeout, StallTimeout: 60 * time.Second, KeepJobs: job.DefaultKeepJobs}
}

// RegisterFlags binds the options to fs, with o's current values as defaults.
func (o *Options) RegisterFlags(fs *cli.FlagSet) {
	fs.StringVar(&o.Listen, "listen", o.Listen, "HTTP listen address (port 0 picks a free one); without a token keep it on loopback")
	fs.StringVar(&o.Token, "api-token", o.Token, "bearer token required on every API call (default $"+TokenEnv+")")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "folder of the job database and outputs")
	fs.StringVar(&o.Model, "model", o.Model, "the model `NAME|DIR`: builtin (SVD), builtin-wan (Wan, prompts), a diffusers folder (its model_index.json picks the family), ORG/NAME[@REV] from the Hugging Face cache, or synthetic (the stand-in, for tests)")
	fs.StringVar(&o.Variant, "variant", o.Variant, `checkpoint weights variant, e.g. "fp16" (converted to float32)`)
	o.Weights.RegisterFlags(fs.FlagSet)
	fs.StringVar(&o.Backend, "backend", o.Backend, "GoMLX backend of the checkpoint model (default: GOMLX_BACKEND or go)")
	fs.Float64Var(&o.StepMS, "step-ms", o.StepMS, "synthetic model: cost of one sample-step in ms")
	fs.StringVar(&o.Cost, "cost", o.Cost, "synthetic model: sleep or spin")
	fs.StringVar(&o.LoRADir, "lora-dir", o.LoRADir, "`DIR` of LoRA files jobs may apply by name (a job's lora and lora_2 lists; applied per call over the shared weights, docs/lora.md)")
	fs.IntVar(&o.NProc, "nproc", o.NProc, "worker ranks: alone, a pipeline of that many stages; with --pp --cfg --cp --dp, their product (checked) (0: 2, or the mesh's)")
	fs.IntVar(&o.PP, "pp", o.PP, "pipeline stages of each replica (mesh: pp x cfg x cp x dp worker ranks; unset: what --nproc leaves)")
	fs.IntVar(&o.CFG, "cfg", o.CFG, "CFG-parallel degree: 2 runs each stage on a pair of ranks, the unconditional and conditional halves of guided jobs (unguided jobs are then refused)")
	fs.IntVar(&o.CP, "cp", o.CP, "context-parallel degree: each stage's ranks split a job's latent frames over this many ranks (jobs with fewer latent frames, or cut into windows, are then refused)")
	fs.IntVar(&o.DP, "dp", o.DP, "data-parallel replicas: this many pipelines share the jobs, each batch going to the least busy one")
	fs.StringVar(&o.Plan, "plan", o.Plan, `"auto": the planner picks the pp x dp mesh for --nproc devices (default 2) and the model's native job, as vdpp plan does`)
	fs.StringVar(&o.Goal, "goal", o.Goal, "planner goal for --plan auto: throughput or latency")
	fs.IntVar(&o.MaxBatch, "max-batch", o.MaxBatch, "samples per denoiser call (0: 4 for synthetic, 1 for a checkpoint, whose rows are not guaranteed bit-independent)")
	fs.IntVar(&o.MaxQueue, "max-queue", o.MaxQueue, "places of the queue of jobs waiting for a slot, shared between clients (an API key, else an address): each may hold its share, one at least; beyond it a client gets 429 (at most twice this many wait in all)")
	fs.DurationVar(&o.DefaultBudget, "default-budget", o.DefaultBudget, "on a CPU backend, the predicted time a job that leaves its size, length and steps out may take: the web page's and a bare OpenAI create's defaults are the largest that fit it and the memory (negative: memory only)")
	fs.IntVar(&o.MaxPrepares, "max-prepares", o.MaxPrepares, "jobs prepared at once (image decode and resize, conditioning) beside the denoising (0: half the cores, 1 to 4)")
	fs.IntVar(&o.MaxRunning, "max-running", o.MaxRunning, "jobs in the pipelines at once (default 2*max-batch per stage of every replica)")
	fs.IntVar(&o.MaxRestarts, "max-restarts", o.MaxRestarts, "restarts allowed per worker rank")
	fs.IntVar(&o.Limits.MaxFrames, "max-frames", o.Limits.MaxFrames, "largest num_frames accepted (0: derived, --max-cost-multiple times the model's native frame count, at least 25: 56 for builtin, 324 for Wan)")
	fs.IntVar(&o.Limits.MaxResolution, "max-resolution", o.Limits.MaxResolution, "largest height or width accepted")
	fs.IntVar(&o.Limits.MaxSteps, "max-steps", o.Limits.MaxSteps, "largest steps accepted")
	fs.Float64Var(&o.CostMultiple, "max-cost-multiple", o.CostMultiple, "a job may cost this many times the model's native job (its default size, frames and steps): in pixels, in pixels x frames x steps, and in a step's estimated working memory (negative: no cost limits)")
	fs.Var((*cli.Bytes)(&o.MaxMemory), "max-memory", "memory the jobs' working sets and the weights share, in bytes or with a unit (64GiB, 512MiB): a job whose step or decode needs more than its share is refused 413 (default: the host's memory, or the cgroup's limit; give the GPU's for a device backend; -1: no memory limit)")
	fs.Var((*cli.Bytes)(&o.MinFreeBytes), "min-free-space", "free disk space the data dir keeps, in bytes or with a unit (2GiB): a submission whose outputs would leave less is refused 507 up front and /readyz answers 503 below it (default: room for four of the model's native jobs, at least 256MiB; -1: no check)")
	fs.Int64Var(&o.MaxPixels, "max-pixels", o.MaxPixels, "largest height x width accepted (0: derived, --max-cost-multiple times the model's native pixels)")
	fs.Int64Var(&o.Limits.MaxBodyBytes, "max-body-bytes", o.Limits.MaxBodyBytes, "largest request body")
	fs.IntVar(&o.Limits.MaxImagePixels, "max-image-pixels", o.Limits.MaxImagePixels, "largest input image, in width x height pixels (0: derived, 16 times the model's native pixels and at least a megapixel: preparing a job filters every input pixel, one job at a time)")
	fs.IntVar(&o.MaxConns, "max-conns", o.MaxConns, "HTTP connections held at once; more are answered 503 and closed (0: from the file-descriptor limit, leaving a quarter and at least 256 for the store and workers, at most 4096)")
	fs.IntVar(&o.MaxConnsPerClient, "max-conns-per-client", o.MaxConnsPerClient, "HTTP connections one client IP address may hold (0: a quarter of --max-conns)")
	fs.StringVar(&o.PidFile, "worker-pid-file", o.PidFile, "write 'RANK PID' of every live worker here (fault tests)")
	fs.StringVar(&o.HoldFile, "test-hold-file", o.HoldFile, "while this file exists, hold every job at its first step: workers' later reports wait (tests of cancel and of a running job)")
	fs.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "a worker silent this long is declared dead")
	fs.DurationVar(&o.StallTimeout, "stall-timeout", o.StallTimeout, "a worker holding a batch without finishing a step this long is restarted (negative: never)")
	fs.DurationVar(&o.KeepJobs, "keep-jobs", o.KeepJobs, "delete a finished job (record, input, latent, videos) this long after it finished; 0 keeps jobs forever")
	fs.Var((*nameList)(&o.ServedModelNames), "served-model-name", "the model name(s) the OpenAI API answers to, comma-separated; the first is reported (default: the --model value, a folder's base name)")
	fs.BoolVar(&o.InProcess, "in-process", o.InProcess, "run the workers as goroutines of this process instead of child processes")
}

// nameList is the flag.Value of a comma-separated list of names (at least one).
type nameList []string

func (l *nameList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *nameList) Set(v string) error {
	*l = nil
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			*l = append(*l, n)
		}
	}
	if len(*l) == 0 {
		return fmt.Errorf("no name in %q", v)
	}
	return nil
}

// MeshGiven reports whether --nproc or a mesh degree was given.
func (o Options) MeshGiven() bool {
	return o.NProc != 0 || o.PP != 0 || o.CFG != 0 || o.CP != 0 || o.DP != 0
}

// AutoMesh reports whether the planner picks the mesh (--plan auto): Config leaves Mesh
// zero and NProc the devices.
func (o Options) AutoMesh() bool { return o.Plan != "" }

// Config checks the options and turns them into a server's Config: the listen address,
// the token (getenv(TokenEnv) when none was given; getenv may be nil), the limits and the
// mesh (with --plan auto, NProc devices and a zero Mesh). Spec carries Variant, Backend,
// StepMS and Cost only: the model is ResolveModelSpec's.
func (o Options) Config(getenv func(string) string) (Config, error) {
	cfg := Config{Listen: o.Listen, Token: o.Token, DataDir: o.DataDir,
		Spec:     ModelSpec{Variant: o.Variant, Backend: o.Backend, StepMS: o.StepMS, Cost: o.Cost, Weights: o.Weights},
		MaxBatch: o.MaxBatch, MaxQueue: o.MaxQueue, MaxPrepares: o.MaxPrepares, DefaultBudget: o.DefaultBudget, MaxRunning: o.MaxRunning, MaxRestarts: o.MaxRestarts,
		Limits: o.Limits, CostMultiple: o.CostMultiple, MaxMemory: o.MaxMemory, MinFreeBytes: o.MinFreeBytes,
		MaxPixels: o.MaxPixels, PidFile: o.PidFile, HoldFile: o.HoldFile, HeartbeatTimeout: o.HeartbeatTimeout,
		StallTimeout: o.StallTimeout, KeepJobs: o.KeepJobs, ServedModelNames: o.ServedNames()}
	cfg.Conns.Max, cfg.Conns.PerClient = o.MaxConns, o.MaxConnsPerClient
	if cfg.Token == "" && getenv != nil {
		cfg.Token = getenv(TokenEnv)
	}
	if o.KeepJobs < 0 {
		return cfg, badOptions("--keep-jobs %v: must be 0 (keep jobs forever) or positive", o.KeepJobs)
	}
	if o.LoRADir != "" {
		st, err := os.Stat(o.LoRADir)
		if err != nil || !st.IsDir() {
			return cfg, badOptions("--lora-dir %s is not a folder", o.LoRADir)
		}
		if cfg.Spec.LoRADir, err = filepath.Abs(o.LoRADir); err != nil {
			return cfg, badOptions("--lora-dir: %v", err)
		}
	}
	if o.AutoMesh() {
		switch {
		case o.Plan != "auto":
			return cfg, badOptions("--plan %q: only \"auto\" is known", o.Plan)
		case o.PP != 0 || o.CFG != 0 || o.CP != 0 || o.DP != 0:
			return cfg, badOptions("--plan auto chooses --pp and --dp itself; give only --nproc (the devices)")
		}
		if _, err := plan.ParseGoal(o.Goal); err != nil {
			return cfg, badOptions("--goal: %w", err)
		}
		cfg.NProc = o.NProc
		if cfg.NProc == 0 {
			cfg.NProc = 2
		}
		return cfg, nil
	}
	mesh, err := comm.MeshFromFlags(o.NProc, o.PP, o.CFG, o.CP, o.DP, 2)
	if err != nil {
		return cfg, badOptions("%w", err)
	}
	if mesh.CFG > 2 {
		return cfg, badOptions("--cfg %d: classifier-free guidance has two halves (use 1 or 2)", mesh.CFG)
	}
	cfg.Mesh, cfg.NProc = mesh, mesh.Size()
	return cfg, nil
}

// ServedNames are the OpenAI API's names of the served model: --served-model-name when
// given, else the --model value (a Hugging Face id as it is, a folder's base name).
func (o Options) ServedNames() []string {
	if len(o.ServedModelNames) > 0 {
		return o.ServedModelNames
	}
	if _, err := os.Stat(o.Model); err != nil && family.IsHFName(o.Model) {
		return []string{o.Model} // a Hugging Face id is the model's name as clients know it
	}
	return []string{filepath.Base(filepath.Clean(o.Model))}
}

// SharedSecret reads the secret every rank of a launched server shares from getenv
// (wire.SecretEnv): workers on other nodes present it to the coordinator.
func SharedSecret(getenv func(string) string) ([]byte, error) {
	v := getenv(wire.SecretEnv)
	secret, err := hex.DecodeString(v)
	if v == "" || err != nil || len(secret) != wire.SecretLen {
		return nil, badOptions("vdpp serve across several processes of a launched world needs $%s: %d hex digits, the same on every rank (e.g. openssl rand -hex %d)",
			wire.SecretEnv, 2*wire.SecretLen, wire.SecretLen)
	}
	return secret, nil
}

// ErrBuiltinUnavailable is the answer to --model builtin in a build without the built-in
// trained model.
var ErrBuiltinUnavailable = errors.New("serve: builtin model not available in this build")

// resolveBuiltin maps a built-in model's name ("builtin", "builtin-wan") to its folder (a
// variable so tests can swap it; nil means a build without built-in models).
var resolveBuiltin = builtin.Resolve

// ResolveModelSpec maps --model to a ModelSpec: a folder, a built-in model or a Hugging
// Face model id in the local cache (a family's model with that folder), or a registered name
// (family.Simulator). A text-to-video folder without its text encoder is refused.
func ResolveModelSpec(name string) (ModelSpec, error) {
	if _, ok := builtin.Lookup(name); ok {
		if resolveBuiltin == nil {
			return ModelSpec{}, ErrBuiltinUnavailable
		}
		dir, err := resolveBuiltin(name)
		if err == nil {
			dir, err = filepath.Abs(dir)
		}
		if err != nil {
			return ModelSpec{}, fmt.Errorf("serve: built-in model %s: %w", name, err)
		}
		return folderSpec(name, dir)
	}
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		abs, err := filepath.Abs(name)
		if err != nil {
			return ModelSpec{}, fmt.Errorf("serve: model folder %s: %w", name, err)
		}
		return folderSpec(name, abs)
	}
	if family.IsHFName(name) {
		dir, err := family.ResolveHF(name, os.Getenv)
		if err != nil {
			return ModelSpec{}, badOptions("--model %w", err)
		}
		return folderSpec(name, dir)
	}
	if name == "" {
		return ModelSpec{}, badOptions("--model is empty")
	}
	return ModelSpec{Name: name}, nil
}

// folderSpec is the ModelSpec of the model folder dir (--model name), of the family its
// model_index.json names (its family's defaults, the folder's sampling defaults included,
// are what a job gets when its JSON leaves them out).
func folderSpec(name, dir string) (ModelSpec, error) {
	// A vdpp_sampling.json the family would refuse at load is refused now, named.
	if _, err := builtin.Sampling(name); err != nil {
		return ModelSpec{}, fmt.Errorf("serve: %w", err)
	}
	// The folder's model_index.json names its family; a folder that does not is refused
	// with the loader's one line (what is missing or unreadable).
	m, err := family.ResolveDir(dir)
	if err != nil {
		return ModelSpec{}, fmt.Errorf("serve: --model %s: %w", name, err)
	}
	fam := m.Family.Name()
	// A text-to-video family's jobs give prompts, which the coordinator encodes: the
	// folder must have its text encoder and tokenizer.
	if d, err := m.Describe(); err == nil && d.TextDim > 0 {
		if err := m.Preflight(family.Options{Roles: family.Roles{Condition: true}, Prompts: true}); err != nil {
			return ModelSpec{}, badOptions("--model %s is a text-to-video model (%s): serving it needs its text encoder to encode the jobs' prompts: %w", name, fam, err)
		}
	}
	return ModelSpec{Name: fam, Dir: dir}, nil
}

// WorkerOptions are the flags of `vdpp worker serve`, one worker rank a server starts
// (ExecLauncher): WorkerArgs renders them from the flag set, so parsing gives them back.
type WorkerOptions struct {
	Connect          string // the server's worker address
	Rank             int
	Model            string // the family's name (ModelSpec.Name)
	ModelDir         string
	Variant          string
	Backend          string
	Weights          family.WeightOptions
	LoRADir          string
	StepMS           float64
	Cost             string
	HeartbeatTimeout time.Duration
}

// DefaultWorkerOptions are the worker's defaults: the synthetic model, the wire's
// heartbeat timeout.
func DefaultWorkerOptions() WorkerOptions {
	return WorkerOptions{Model: family.Simulator, StepMS: 1, Cost: "sleep", HeartbeatTimeout: wire.DefaultHeartbeatTimeout}
}

// RegisterFlags binds the options to fs, with o's current values as defaults.
func (o *WorkerOptions) RegisterFlags(fs *cli.FlagSet) {
	fs.StringVar(&o.Connect, "connect", o.Connect, "the server's worker address")
	fs.IntVar(&o.Rank, "rank", o.Rank, "this worker's rank")
	fs.StringVar(&o.Model, "model", o.Model, "model name")
	fs.StringVar(&o.ModelDir, "model-dir", o.ModelDir, "checkpoint folder")
	fs.StringVar(&o.Variant, "variant", o.Variant, "checkpoint weights variant")
	o.Weights.RegisterFlags(fs.FlagSet)
	fs.StringVar(&o.Backend, "backend", o.Backend, "GoMLX backend")
	fs.Float64Var(&o.StepMS, "step-ms", o.StepMS, "synthetic model: cost of one sample-step in ms")
	fs.StringVar(&o.Cost, "cost", o.Cost, "synthetic model: sleep or spin")
	fs.StringVar(&o.LoRADir, "lora-dir", o.LoRADir, "the server's LoRA folder")
	fs.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "give up on a silent server after this")
}

// Spec is the worker's model.
func (o WorkerOptions) Spec() ModelSpec {
	return ModelSpec{Name: o.Model, Dir: o.ModelDir, Variant: o.Variant, Backend: o.Backend, Weights: o.Weights, StepMS: o.StepMS, Cost: o.Cost, LoRADir: o.LoRADir}
}

// WorkerArgs are the arguments of `vdpp worker serve` for one rank: every flag of
// WorkerOptions.RegisterFlags, rendered from the flag set.
func WorkerArgs(spec ModelSpec, rank int, addr string) []string {
	o := DefaultWorkerOptions()
	o.Connect, o.Rank = addr, rank
	o.Model, o.ModelDir, o.Variant, o.Backend, o.StepMS, o.Cost = spec.Name, spec.Dir, spec.Variant, spec.Backend, spec.StepMS, spec.Cost
	o.Weights, o.LoRADir = spec.Weights, spec.LoRADir
	return append([]string{"worker", "serve"}, o.Args()...)
}

// Args renders the options as flags (parsing them gives o back).
func (o WorkerOptions) Args() []string {
	fs := cli.New("worker serve", nil, nil)
	c := o
	c.RegisterFlags(fs)
	return fs.AsArgs()
}
