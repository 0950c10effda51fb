package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"image"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/openai"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/video"
)

// Config is everything `vdpp serve` configures.
type Config struct {
	// Listen is the HTTP address (default 127.0.0.1:8080; port 0 picks a free one).
	Listen string
	// Token, when set, is the bearer token every API call must present.
	Token   string
	DataDir string
	Spec    ModelSpec
	// ServedModelNames are the names the OpenAI API answers to (a create's "model", GET
	// /v1/models); the first is the one it reports. Default: Spec.Name.
	ServedModelNames []string
	// NProc is the number of worker ranks (the mesh's size when Mesh is set).
	NProc int
	// Mesh lays the worker ranks out as pp x cfg x cp x dp (comm.Mesh, comm's rank order):
	// DP data-parallel replicas, each a pipeline of PP stages, each stage one rank or a unit
	// of CFG x CP ranks (jobs the unit cannot run are then refused: checkJobMesh). CFG above
	// 2 is refused. Zero: one pipeline of NProc stages.
	Mesh   comm.Mesh
	Limits job.Limits
	// MaxBatch, MaxQueue, MaxRunning, MaxPrepares: see coordConfig. MaxBatch 0 means the
	// model's default (Model.MaxBatch: 1 for checkpoint models).
	MaxBatch, MaxQueue, MaxRunning, MaxPrepares int
	// MaxRestarts bounds the restarts of each worker rank.
	MaxRestarts int
	// StallTimeout: see coordConfig (default 60 s; negative disables).
	StallTimeout time.Duration
	// Launcher starts worker ranks (default ExecLauncher: child processes of this binary;
	// RemoteLauncher for ranks on other nodes).
	Launcher Launcher
	// WorkerListen is where the coordinator listens for its workers (default 127.0.0.1:0;
	// workers on other nodes need an address they reach). Secret is what they must present
	// (default: a fresh random one, handed to the child processes).
	WorkerListen string
	Secret       []byte
	// PidFile, when set, receives "RANK PID" lines for the live workers.
	PidFile                     string
	Heartbeat, HeartbeatTimeout time.Duration
	Log                         *slog.Logger
	// WorkerOutput receives the worker processes' logs (default os.Stderr).
	WorkerOutput io.Writer
	// MP4 writes an MP4 (default: H.264 through ffmpeg when it is installed, else
	// WriteMP4PCM).
	MP4 func(path string, frames []image.Image, fps float64) error
	// KeepJobs is how long a finished (succeeded, failed or cancelled) job is kept: once
	// its FinishedAt is more than KeepJobs ago, its record, its files and its place in
	// memory are deleted, and its id answers 404 like one never seen. 0 keeps every job
	// forever; negative is refused. `vdpp serve --keep-jobs` defaults to DefaultKeepJobs.
	// Expired jobs are swept at start-up (New) and then every KeepJobs/10, clamped to
	// [1 s, 1 h].
	KeepJobs time.Duration
	// Now is the server's clock (default time.Now): job times and their expiry.
	Now func() time.Time
	// SweepTick, when set, replaces the periodic sweep's ticker: every value received
	// sweeps once (tests).
	SweepTick <-chan time.Time
	// Conns bounds the HTTP connections (zero fields: httpapi.DefaultConnLimits of the
	// process's descriptor limit).
	Conns httpapi.ConnLimits
	// CostMultiple sets the served model's CostLimits (DeriveCostLimits of its defaults):
	// 0 means DefaultCostMultiple, negative disables the cost limits.
	CostMultiple float64
	// MaxPixels, when positive, replaces the derived limit on height·width.
	MaxPixels int64
	// MaxMemory is the memory the jobs' working sets and the weights share (bytes): 0 is
	// the host's (hostMemory: /proc/meminfo, or the cgroup's limit when lower); give the
	// device's when the workers compute on an accelerator; negative: no memory limit.
	MaxMemory int64
	// Memory, when set, replaces hostMemory (tests).
	hostMemory func() int64
	// DefaultBudget is the predicted time a job that leaves its size, length and steps
	// out may take on a CPU backend: the served defaults are fitted to it and to the
	// machine's memory (servedDefaults; 0: DefaultBudget; negative: memory only).
	DefaultBudget time.Duration
	// MinFreeBytes is the free disk space the data dir keeps: a submission that would
	// leave less (its outputs estimated by job.DiskBytes) is refused 507 up front, and
	// /readyz answers 503 below it. 0: job.DeriveMinFreeBytes of the model's native job;
	// negative: no check.
	MinFreeBytes int64
	// freeBytes, when set, replaces the file system's free space (tests).
	freeBytes func() (int64, error)
	// HoldFile is a seam for tests of the real binary (`vdpp serve --test-hold-file`):
	// while the file exists, the coordinator takes in no worker report past a job's first
	// step (the progress of a later step, a result, a dropped row), so a job that has run
	// its first step stays running there, and a cancel shows as requested, until the file
	// is removed. Empty: no hold.
	HoldFile string

	// model, when set, replaces the model OpenModel loads from Spec (tests).
	model generator
}

// shutdownGrace bounds how long Close waits for HTTP requests in progress.
const shutdownGrace = 2 * time.Second

// Server is a running `vdpp serve`.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store *jobStore
	gen   generator
	// defaultsWhy says why the served defaults are not the model's own ("" when they are).
	defaultsWhy string
	coord       *coordinator
	pool        *pool
	metrics     *metricSet
	http        *http.Server
	ln, wln     net.Listener
	done        chan struct{}
	once        sync.Once
	mp4         func(path string, frames []image.Image, fps float64) error
	errc        chan error
	// swept is closed when the sweep loop has ended (nil when none was started).
	swept chan struct{}
	hooks serverHooks

	// Renders (decode and write a job's GIF/MP4 on its first download) write job files;
	// Close refuses new ones, cancels their context and waits for them.
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	closing bool
	renders sync.WaitGroup
	flights renderFlights // concurrent first downloads share a render

	// cost bounds what one job may cost the served model; it is fixed at New.
	cost job.CostLimits
}

// serverHooks are test seams; nil in production.
type serverHooks struct {
	// contentRead runs when a content download has found its job succeeded and is about
	// to read the job's files.
	contentRead func(id string)
}

// New opens the data dir and builds the server; Start runs it.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8080"
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("serve: --data-dir is required")
	}
	if cfg.KeepJobs < 0 {
		return nil, fmt.Errorf("serve: --keep-jobs %v: must be 0 (keep jobs forever) or positive", cfg.KeepJobs)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Limits == (job.Limits{}) {
		cfg.Limits = job.DefaultLimits()
	}
	if cfg.Limits.MaxBodyBytes <= 0 {
		cfg.Limits.MaxBodyBytes = job.DefaultLimits().MaxBodyBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	mesh, err := resolveMesh(cfg.NProc, cfg.Mesh)
	if err != nil {
		return nil, err
	}
	cfg.Mesh, cfg.NProc = mesh, mesh.Size()
	gen := cfg.model
	if gen == nil {
		m, err := OpenModel(cfg.Spec)
		if err != nil {
			return nil, err
		}
		gen = m
	}
	if cfg.MaxBatch < 1 {
		cfg.MaxBatch = gen.MaxBatch()
	}
	s := &Server{cfg: cfg, log: cfg.Log, gen: gen, done: make(chan struct{}), mp4: cfg.MP4, errc: make(chan error, 2)}
	machine, err := s.machine()
	if err != nil {
		gen.Close()
		return nil, err
	}
	s.cost = modelCostLimits(gen, cfg.CostMultiple, cfg.MaxPixels).WithMachine(machine)
	if s.cfg.Limits.MaxFrames == 0 {
		s.cfg.Limits.MaxFrames = job.DeriveMaxFrames(s.cost)
	}
	if s.cfg.MinFreeBytes == 0 {
		s.cfg.MinFreeBytes = job.DeriveMinFreeBytes(gen.DefaultParams())
	}
	if s.cfg.freeBytes == nil {
		s.cfg.freeBytes = func() (int64, error) { return freeBytes(cfg.DataDir) }
	}
	if s.cfg.Limits.MaxImagePixels == 0 {
		s.cfg.Limits.MaxImagePixels = job.DeriveMaxImagePixels(gen.DefaultParams())
	}
	if served, why := s.servedDefaults(cfg.DefaultBudget); why != "" {
		gen.SetServedDefaults(served)
		s.defaultsWhy = why
		cfg.Log.Info("default job fitted to this server", "width", served.Width, "height", served.Height,
			"frames", served.NumFrames, "steps", served.Steps, "why", why)
	}
	cfg.Log.Info("cost limits", "multiple", s.cost.Multiple, "max_pixels", s.cost.MaxPixels,
		"max_work", s.cost.MaxWork, "max_activation_bytes", s.cost.MaxActivationBytes,
		"memory_bytes", machine.MemoryBytes, "weight_bytes", machine.WeightBytes)
	store, recs, err := openStore(cfg.DataDir, cfg.Log)
	if err != nil {
		gen.Close()
		return nil, err
	}
	m := newMetrics()
	m.storeQuarantined.Add(float64(store.report.Quarantined))
	m.storeRecovered.Add(float64(store.report.Recovered))
	if recs, err = s.checkRecords(store, recs); err != nil {
		store.Close()
		gen.Close()
		return nil, err
	}
	stall := cfg.StallTimeout
	if stall == 0 {
		stall = 60 * time.Second
	}
	// The replicas are the mesh's pipeline chains of cfg 0 and cp 0: each chain is one replica's
	// stages in order, and each of its ranks leads its stage's unit (unit.go).
	coord, err := newCoordinator(coordConfig{Model: gen, Store: store, Records: recs, NProc: cfg.NProc, Replicas: meshReplicas(cfg.Mesh), Mesh: cfg.Mesh,
		MaxBatch: cfg.MaxBatch, MaxQueue: cfg.MaxQueue, MaxRunning: cfg.MaxRunning, MaxPrepares: cfg.MaxPrepares, Metrics: m, Log: cfg.Log,
		StallTimeout: stall, StepRatePrior: gen.StepSecondsPerUnit(), HoldFile: cfg.HoldFile, Now: cfg.Now})
	if err != nil {
		store.Close()
		gen.Close()
		return nil, err
	}
	s.store, s.coord, s.metrics = store, coord, m
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.flights.init(m)
	if s.mp4 == nil {
		s.mp4 = writeMP4
	}
	// Nothing can submit yet: the expired jobs go first.
	s.Sweep()
	launcher := cfg.Launcher
	if launcher == nil {
		launcher = ExecLauncher{Spec: cfg.Spec, NProc: cfg.NProc, Stdout: cfg.WorkerOutput, Stderr: cfg.WorkerOutput}
	}
	s.pool = &pool{Launcher: launcher, Mesh: cfg.Mesh, NProc: cfg.NProc, MaxRestarts: cfg.MaxRestarts, PidFile: cfg.PidFile, Log: cfg.Log,
		OnRestart: func(int) { m.restarts.Inc() },
		Connected: coord.connected}
	coord.onLost = func(rank, pid int) { s.pool.killIf(rank, pid) }
	return s, nil
}

// Start listens for HTTP and for workers, and starts the worker ranks. It returns once the
// HTTP listener is bound (Addr is valid); the ranks join in the background (see /readyz).
func (s *Server) Start() error {
	waddr := s.cfg.WorkerListen
	if waddr == "" {
		waddr = "127.0.0.1:0"
	}
	wln, err := net.Listen("tcp", waddr)
	if err != nil {
		return fmt.Errorf("serve: worker listener %s: %w", waddr, err)
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		wln.Close()
		return fmt.Errorf("serve: listen %s: %w", s.cfg.Listen, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && s.cfg.Token == "" {
		s.log.Warn("listening beyond loopback without an API token", "addr", ln.Addr())
	}
	s.cfg.Conns = s.cfg.Conns.WithDefaults(fileLimit())
	s.log.Info("connection limits", "max_conns", s.cfg.Conns.Max, "max_conns_per_client", s.cfg.Conns.PerClient)
	s.ln, s.wln = httpapi.NewLimitListener(ln, s.cfg.Conns, s.metrics.reg), wln
	secret := s.cfg.Secret
	if secret == nil {
		secret = make([]byte, wire.SecretLen)
		rand.Read(secret)
	} else if len(secret) != wire.SecretLen {
		ln.Close()
		wln.Close()
		return fmt.Errorf("serve: the worker secret has %d bytes, want %d", len(secret), wire.SecretLen)
	}
	go s.coord.watchStalls(s.done)
	if s.cfg.KeepJobs > 0 {
		tick, stop := s.cfg.SweepTick, func() {}
		if tick == nil {
			t := time.NewTicker(sweepInterval(s.cfg.KeepJobs))
			tick, stop = t.C, t.Stop
		}
		s.swept = make(chan struct{})
		go s.sweepLoop(tick, stop)
	}
	go func() {
		if err := s.coord.ServeWorkers(wln, secret, s.cfg.Heartbeat, s.cfg.HeartbeatTimeout); err != nil {
			s.errc <- err
		}
	}()
	if err := s.pool.Start(wln.Addr().String(), secret); err != nil {
		ln.Close()
		wln.Close()
		return err
	}
	s.http = httpapi.NewServer(s.Handler(), s.log)
	go func() {
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}()
	return nil
}

// Handler returns the server's HTTP API: the native routes and the OpenAI Videos API.
func (s *Server) Handler() http.Handler {
	b := backend{s}
	names := s.cfg.ServedModelNames
	if len(names) == 0 {
		names = []string{s.cfg.Spec.Name}
	}
	oa := openai.New(openai.Config{Backend: b, Names: names, Limits: s.cfg.Limits, KeepJobs: s.cfg.KeepJobs, Log: s.log})
	return httpapi.New(httpapi.Config{Backend: b, OpenAI: oa, Token: s.cfg.Token, Limits: s.cfg.Limits,
		Metrics: s.metrics.Handler(), Done: s.done, Log: s.log}).Handler()
}

// Addr is the HTTP listener's address ("127.0.0.1:PORT").
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Err receives a fatal listener error.
func (s *Server) Err() <-chan error { return s.errc }

// WaitReady returns once every worker rank has joined, or when ctx ends (its error).
func (s *Server) WaitReady(ctx context.Context) error { return s.coord.waitReady(ctx) }

// Close stops HTTP (open event streams end; requests in progress get shutdownGrace), the
// sweeps, the renders, the workers and the coordinator, and closes the store only once
// nothing can write to it any more: a result the coordinator has already received from a
// worker is recorded (a job whose last step came back ends succeeded, its latent on disk).
// Unfinished jobs stay queued in the store.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done) // event streams and the sweep loop end
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			s.http.Shutdown(ctx)
			cancel()
		}
		s.stopRenders()
		if s.swept != nil {
			<-s.swept
		}
		if s.wln != nil {
			s.wln.Close()
		}
		s.pool.markClosing() // workers that see their connection close now are not restarted
		s.coord.Close()      // waits for read loops, result and record writes, submissions
		s.pool.Close()
		err = errors.Join(s.store.Close(), s.gen.Close())
	})
	return err
}

// machine is what the jobs run on: the memory (Config.MaxMemory, else the host's), the
// weights the coordinator and every worker rank hold, the ranks. A model whose weights
// alone do not fit is refused with one line.
func (s *Server) machine() (job.Machine, error) {
	mem := s.cfg.MaxMemory
	if mem == 0 {
		detect := s.cfg.hostMemory
		if detect == nil {
			detect = hostMemory
		}
		mem = detect()
	}
	w := s.gen.Weights()
	m := job.Machine{MemoryBytes: max(mem, 0), Ranks: s.cfg.NProc,
		WeightBytes: w.Condition + w.Decode + int64(s.cfg.NProc)*w.Denoiser}
	if m.StepMemory() < 0 {
		return m, fmt.Errorf("serve: the model's weights (%d MiB held by the coordinator and %d worker ranks) do not fit in %.0f%% of %d MiB of memory: use fewer ranks (--nproc), or --max-memory for the memory the workers really have",
			m.WeightBytes>>20, m.Ranks, 100*job.UsableMemory, m.MemoryBytes>>20)
	}
	return m, nil
}

// diskOK refuses (job.ErrStorage, as a full disk: 507) when writing need more bytes would
// leave less free space in the data dir than Config.MinFreeBytes.
func (s *Server) diskOK(need int64) error {
	if s.cfg.MinFreeBytes < 0 {
		return nil
	}
	free, err := s.cfg.freeBytes()
	if err != nil {
		return fmt.Errorf("%w: free space of the data dir: %w", job.ErrStorage, err)
	}
	if free-need < s.cfg.MinFreeBytes {
		return fmt.Errorf("%w: %d MiB free in the data dir, %d MiB needed, keeping %d MiB (--min-free-space): %w",
			job.ErrStorage, free>>20, need>>20, s.cfg.MinFreeBytes>>20, syscall.ENOSPC)
	}
	return nil
}

// checkRecords checks every loaded record against its files and this server's limits,
// model and mesh (job.CheckRecord): a record that cannot be served as it is (a server
// restarted with another mesh, other limits or another model) ends failed, with its reason,
// and is written back before anything runs.
func (s *Server) checkRecords(store *jobStore, recs []job.Record) ([]job.Record, error) {
	admit := func(p job.Params) error {
		// The stored job is resolved: its knobs are given again as they stand.
		t := s.gen.Description().Knobs
		_, err := s.gen.ResolveParams(p, t.NonZero((*family.Params)(&p)), s.cfg.Limits)
		if err == nil {
			err = s.checkJobMesh(p)
		}
		if err == nil {
			err = s.checkCost(p)
		}
		if ke, ok := knob.AsError(err); ok {
			return ke // the one line a client reads, naming the knob
		}
		return err
	}
	for i, r := range recs {
		fixed, err := job.CheckRecord(r, store.files(r.ID), admit)
		if err == nil {
			continue
		}
		fixed.Rev++
		s.log.Warn("job record does not hold on this server; ending it failed", "err", err)
		if err := store.Put(fixed); err != nil {
			return nil, err
		}
		recs[i] = fixed
	}
	return recs, nil
}

// beginRender counts a render for Close, or refuses with ErrClosed once Close has begun.
func (s *Server) beginRender() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return job.ErrClosed
	}
	s.renders.Add(1)
	return nil
}

// stopRenders refuses new renders, cancels the context of those in progress (a Generator
// that has not started decoding gives up) and waits for them.
func (s *Server) stopRenders() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.cancel()
	s.renders.Wait()
}

// writeMP4 encodes with ffmpeg when it is on the PATH and falls back to WriteMP4PCM.
func writeMP4(path string, frames []image.Image, fps float64) error {
	if err := video.WriteMP4(path, frames, fps); !errors.Is(err, video.ErrNoFFmpeg) {
		return err
	}
	var buf bytes.Buffer
	if err := video.WriteMP4PCM(&buf, frames, int(fps)); err != nil {
		return err
	}
	return writeSynced(path, buf.Bytes())
}
