package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/wire"
)

// Proc is a started worker rank.
type Proc interface {
	Pid() int
	// Wait returns when the worker has exited.
	Wait() error
	// Kill ends the worker abruptly (SIGKILL for a process).
	Kill() error
	// Stop asks the worker to end (SIGTERM for a process).
	Stop() error
}

// Launcher starts worker ranks that connect to the coordinator at addr with secret.
type Launcher interface {
	Start(rank int, addr string, secret []byte) (Proc, error)
}

// ExecLauncher starts each rank as a child process: Executable (default: this binary)
// with Args(rank) (default: "worker serve" plus Spec's flags), the secret in SecretEnv and
// the launcher variables RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE.
type ExecLauncher struct {
	Executable     string
	Spec           ModelSpec
	NProc          int
	Args           func(rank int, addr string) []string
	Stdout, Stderr io.Writer
}

// Start implements Launcher.
func (l ExecLauncher) Start(rank int, addr string, secret []byte) (Proc, error) {
	exe := l.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("serve: find own executable: %w", err)
		}
	}
	args := WorkerArgs(l.Spec, rank, addr)
	if l.Args != nil {
		args = l.Args(rank, addr)
	}
	env := append(os.Environ(), wire.SecretEnv+"="+fmt.Sprintf("%x", secret),
		"RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(max(l.NProc, rank+1)),
		"LOCAL_RANK="+strconv.Itoa(rank), "LOCAL_WORLD_SIZE="+strconv.Itoa(max(l.NProc, rank+1)))
	out, errw := l.Stdout, l.Stderr
	if out == nil {
		out = os.Stderr
	}
	if errw == nil {
		errw = os.Stderr
	}
	p, err := comm.StartProcess(comm.ProcSpec{Rank: rank, LocalRank: rank, Path: exe, Args: args, Env: env,
		Stdout: &prefixWriter{w: out, prefix: fmt.Sprintf("[worker %d] ", rank)},
		Stderr: &prefixWriter{w: errw, prefix: fmt.Sprintf("[worker %d] ", rank)}})
	if err != nil {
		return nil, err
	}
	e := &execProc{p: p, done: make(chan struct{})}
	go func() {
		e.err = p.Wait()
		close(e.done)
	}()
	return e, nil
}

// execProc reaps its child exactly once (in its own goroutine), so any number of callers
// may Wait.
type execProc struct {
	p    comm.Process
	done chan struct{}
	err  error
}

func (e *execProc) Pid() int { return e.p.Pid() }
func (e *execProc) Wait() error {
	<-e.done
	return e.err
}
func (e *execProc) Kill() error { return e.p.Signal(syscall.SIGKILL) }
func (e *execProc) Stop() error { return e.p.Signal(syscall.SIGTERM) }

// prefixWriter prefixes each line (workers' logs in the server's stderr).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	line   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range b {
		if len(p.line) == 0 {
			p.line = append(p.line, p.prefix...)
		}
		p.line = append(p.line, c)
		if c == '\n' {
			p.w.Write(p.line)
			p.line = p.line[:0]
		}
	}
	return len(b), nil
}

// RemoteLauncher is the Launcher of ranks that run on other nodes and connect on their own
// (RunRemoteWorker, started by the node's launcher or orchestrator): Start starts nothing,
// and a "restart" after a lost connection waits for the rank to connect again.
type RemoteLauncher struct{}

// Start implements Launcher.
func (RemoteLauncher) Start(int, string, []byte) (Proc, error) {
	return &remoteProc{gone: make(chan struct{})}, nil
}

// remoteProc stands for a rank on another node: it "exits" when the coordinator loses its
// connection (Kill), which the pool counts as a restart.
type remoteProc struct {
	gone chan struct{}
	once sync.Once
}

func (r *remoteProc) Pid() int    { return 0 }
func (r *remoteProc) Wait() error { <-r.gone; return errRemoteLost }
func (r *remoteProc) Kill() error { r.once.Do(func() { close(r.gone) }); return nil }
func (r *remoteProc) Stop() error { return r.Kill() }

var errRemoteLost = errors.New("the remote worker's connection was lost")

// InProcLauncher runs each rank as goroutines of this process (tests, and --nproc on a
// single process). Kill closes the rank's connection abruptly, as a dead process would.
type InProcLauncher struct {
	Spec ModelSpec
	// NewDenoiser builds a rank's model (default model.New(Spec.DenoiserConfig())).
	NewDenoiser func() (model.Denoiser, error)
	Log         *slog.Logger
}

// Start implements Launcher.
func (l InProcLauncher) Start(rank int, addr string, secret []byte) (Proc, error) {
	var den model.Denoiser
	if l.NewDenoiser != nil {
		var err error
		if den, err = l.NewDenoiser(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := wire.Dial(ctx, addr, rank, -1, secret)
	if err != nil {
		cancel()
		return nil, err
	}
	p := &inProc{cancel: cancel, conn: conn, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = RunWorker(ctx, WorkerConfig{Rank: rank, Spec: l.Spec, Denoiser: den, Conn: conn, Log: l.Log})
	}()
	return p, nil
}

type inProc struct {
	cancel context.CancelFunc
	conn   net.Conn
	done   chan struct{}
	err    error
}

func (p *inProc) Pid() int { return -1 }
func (p *inProc) Wait() error {
	<-p.done
	if p.err == nil {
		return errors.New("exited")
	}
	return p.err
}
func (p *inProc) Kill() error {
	if tc, ok := p.conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	p.conn.Close()
	p.cancel()
	return nil
}
func (p *inProc) Stop() error { p.cancel(); return nil }

// pool starts the worker ranks and restarts a rank that exits, up to MaxRestarts times per
// rank, writing the live pids to PidFile (one "RANK PID" line per rank) when set.
type pool struct {
	Launcher Launcher
	// Mesh lays the NProc ranks out (zero: one pipeline).
	Mesh        comm.Mesh
	NProc       int
	MaxRestarts int
	PidFile     string
	Log         *slog.Logger
	// OnRestart is called for each restart (metrics).
	OnRestart func(rank int)
	// Connected reports whether a rank is connected (for Workers).
	Connected func(rank int) bool

	mu      sync.Mutex
	procs   []Proc
	info    []httpapi.WorkerInfo
	closing bool
	wg      sync.WaitGroup
	// pidMu orders the pid file's writes: each reads the ranks and writes the file under
	// it, so the last write holds the latest pids (two ranks restarting at once, as a cfg
	// unit's members do, never leave a dead pid behind).
	pidMu sync.Mutex
}

// Start launches every rank; each is supervised until Close.
func (p *pool) Start(addr string, secret []byte) error {
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	p.procs = make([]Proc, p.NProc)
	p.info = make([]httpapi.WorkerInfo, p.NProc)
	mesh := p.Mesh
	if mesh == (comm.Mesh{}) {
		mesh = comm.Mesh{PP: p.NProc, CFG: 1, CP: 1, DP: 1}
	}
	for r := range p.NProc {
		c := mesh.Coords(r)
		p.info[r] = httpapi.WorkerInfo{Rank: r, Replica: c.DP, Stage: c.PP}
		proc, err := p.Launcher.Start(r, addr, secret)
		if err != nil {
			p.Close()
			return fmt.Errorf("serve: start worker %d: %w", r, err)
		}
		p.mu.Lock()
		p.procs[r], p.info[r].Pid = proc, proc.Pid()
		p.mu.Unlock()
	}
	p.writePids()
	for r := range p.NProc {
		p.wg.Add(1)
		go p.supervise(r, addr, secret)
	}
	return nil
}

func (p *pool) supervise(rank int, addr string, secret []byte) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		proc := p.procs[rank]
		p.mu.Unlock()
		err := proc.Wait()
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			return
		}
		if p.info[rank].Restarts >= p.MaxRestarts {
			p.info[rank].Gone = true
			p.mu.Unlock()
			p.Log.Error("worker exited; no restarts left", "rank", rank, "err", err, "max_restarts", p.MaxRestarts)
			p.writePids()
			return
		}
		p.info[rank].Restarts++
		p.info[rank].Restarting = true
		p.mu.Unlock()
		p.writePids() // the dead pid leaves the file at once
		p.Log.Warn("worker exited; restarting", "rank", rank, "err", err)
		if p.OnRestart != nil {
			p.OnRestart(rank)
		}
		for {
			time.Sleep(100 * time.Millisecond)
			np, serr := p.Launcher.Start(rank, addr, secret)
			p.mu.Lock()
			if p.closing {
				p.mu.Unlock()
				if serr == nil {
					np.Kill()
					np.Wait()
				}
				return
			}
			if serr == nil {
				p.procs[rank], p.info[rank].Pid = np, np.Pid()
				p.info[rank].Restarting = false
				p.mu.Unlock()
				break
			}
			p.mu.Unlock()
			p.Log.Error("restart worker", "rank", rank, "err", serr)
			time.Sleep(time.Second)
		}
		p.writePids()
	}
}

// Kill ends rank abruptly (the admin endpoint and fault tests use it).
func (p *pool) Kill(rank int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rank < 0 || rank >= len(p.procs) || p.procs[rank] == nil {
		return fmt.Errorf("%w %d (this server's ranks are 0 to %d)", job.ErrNoWorker, rank, len(p.procs)-1)
	}
	switch in := p.info[rank]; {
	case in.Gone:
		return fmt.Errorf("%w: worker rank %d has exited with no restarts left", job.ErrConflict, rank)
	case in.Restarting:
		return fmt.Errorf("%w: worker rank %d is restarting", job.ErrConflict, rank)
	}
	if err := p.procs[rank].Kill(); err != nil {
		// It exited before the kill: its supervisor restarts it.
		return fmt.Errorf("%w: worker rank %d has just exited: %v", job.ErrConflict, rank, err)
	}
	return nil
}

// Workers describes every rank.
func (p *pool) Workers() []httpapi.WorkerInfo {
	p.mu.Lock()
	out := append([]httpapi.WorkerInfo(nil), p.info...)
	p.mu.Unlock()
	for i := range out {
		if p.Connected != nil {
			out[i].Connected = p.Connected(out[i].Rank)
		}
	}
	return out
}

// writePids writes "RANK PID" for every live rank (not gone, not restarting) to PidFile.
func (p *pool) writePids() {
	if p.PidFile == "" {
		return
	}
	p.pidMu.Lock()
	defer p.pidMu.Unlock()
	p.mu.Lock()
	var b strings.Builder
	for _, in := range p.info {
		if !in.Gone && !in.Restarting {
			fmt.Fprintf(&b, "%d %d\n", in.Rank, in.Pid)
		}
	}
	p.mu.Unlock()
	if err := writeSynced(p.PidFile, []byte(b.String())); err != nil {
		p.Log.Error("write pid file", "err", err)
	}
}

// Close stops every rank (SIGTERM, then SIGKILL after a second) and waits for them.
func (p *pool) Close() {
	p.mu.Lock()
	p.closing = true
	procs := append([]Proc(nil), p.procs...)
	p.mu.Unlock()
	for _, pr := range procs {
		if pr != nil {
			pr.Stop()
		}
	}
	done := make(chan struct{})
	go func() {
		for _, pr := range procs {
			if pr != nil {
				pr.Wait()
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		for _, pr := range procs {
			if pr != nil {
				pr.Kill()
			}
		}
		<-done
	}
	p.wg.Wait()
}

// killIf kills rank's current process if its pid is pid (a worker whose connection died
// but whose process may still run is ended, so the supervisor restarts it cleanly).
func (p *pool) killIf(rank, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing || rank < 0 || rank >= len(p.procs) || p.procs[rank] == nil {
		return
	}
	if _, remote := p.procs[rank].(*remoteProc); !remote && p.procs[rank].Pid() != pid {
		return
	}
	p.procs[rank].Kill()
}

// markClosing stops restarts: a rank that exits from now on stays down.
func (p *pool) markClosing() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
}
