package comm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrLaunch: the launcher's options are unusable.
var ErrLaunch = errors.New("comm: launch")

// ErrInterrupted: the job was stopped by SIGINT or SIGTERM (Ctrl-C), not by a failure.
var ErrInterrupted = errors.New("interrupted")

// InterruptedStatus is the exit status of a vdpp process that was interrupted (128 +
// SIGINT, as a shell reports it).
const InterruptedStatus = 130

// stoppedBySignal reports whether a child's exit (Process.Wait's error) is what stopping
// it does: the interrupted status, or death by SIGINT, SIGTERM or SIGKILL.
func stoppedBySignal(err error) bool {
	if err == nil {
		return true
	}
	switch err.Error() {
	case "exit status " + strconv.Itoa(InterruptedStatus), "signal: interrupt", "signal: terminated", "signal: killed":
		return true
	}
	return false
}

// DefaultGracePeriod is how long stopped children get between SIGTERM and SIGKILL.
const DefaultGracePeriod = 3 * time.Second

// LaunchOptions describe the processes Launch starts on this node.
type LaunchOptions struct {
	NProcPerNode int    // processes on this node (default 1)
	NNodes       int    // nodes in the world (default 1)
	NodeRank     int    // this node's index, 0..NNodes-1
	MasterAddr   string // rendezvous host (default 127.0.0.1)
	MasterPort   int    // rendezvous port; 0 picks a free one (one node only)
	// Executable is the program of every child (default os.Executable(): the same binary).
	Executable string
	// Command is the children's argv after the program name (what followed "--").
	Command []string
	// Env is the children's base environment (default os.Environ()); the launcher
	// appends RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
	Env []string
	// Stdout and Stderr receive the children's output, each line prefixed "[rank N] "
	// (default os.Stdout and os.Stderr).
	Stdout, Stderr io.Writer
	// GracePeriod is the time between SIGTERM and SIGKILL when stopping children
	// (default DefaultGracePeriod).
	GracePeriod time.Duration
	// Start starts one child (default StartProcess); tests swap it.
	Start StartFunc
	// Signals, when non-nil, replaces the launcher's own SIGINT/SIGTERM subscription: what
	// arrives on it is forwarded to every child.
	Signals <-chan os.Signal
	// OwnSessions starts every child in a session of its own (setsid) rather than only a
	// process group of its own. Linux's autogroup scheduling shares the CPUs between
	// sessions, so children of one session together get one session's share on a busy
	// machine; in sessions of their own each gets a share.
	OwnSessions bool
}

// ProcSpec is one child to start.
type ProcSpec struct {
	Rank, LocalRank int
	Path            string
	Args            []string
	Env             []string
	Stdout, Stderr  io.Writer
	OwnSession      bool // a session of its own (LaunchOptions.OwnSessions)
}

// Process is a started child.
type Process interface {
	Pid() int
	// Wait waits for the exit: nil for status 0, else an error whose text is the status
	// ("exit status 1", "signal: killed").
	Wait() error
	// Signal sends sig to the child (and its process group).
	Signal(sig os.Signal) error
}

// StartFunc starts one child.
type StartFunc func(ProcSpec) (Process, error)

// ChildEnvs returns the launcher variables of every child of this node, by local rank.
func (o LaunchOptions) ChildEnvs() []Env {
	o = o.withDefaults()
	envs := make([]Env, o.NProcPerNode)
	for i := range envs {
		envs[i] = Env{
			Rank: o.NodeRank*o.NProcPerNode + i, WorldSize: o.NNodes * o.NProcPerNode,
			LocalRank: i, LocalWorldSize: o.NProcPerNode,
			MasterAddr: o.MasterAddr, MasterPort: o.MasterPort,
		}
	}
	return envs
}

func (o LaunchOptions) withDefaults() LaunchOptions {
	if o.NProcPerNode == 0 {
		o.NProcPerNode = 1
	}
	if o.NNodes == 0 {
		o.NNodes = 1
	}
	if o.MasterAddr == "" {
		o.MasterAddr = "127.0.0.1"
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = DefaultGracePeriod
	}
	if o.Start == nil {
		o.Start = StartProcess
	}
	return o
}

func (o LaunchOptions) validate() error {
	switch {
	case o.NProcPerNode < 1:
		return fmt.Errorf("%w: nproc-per-node %d < 1", ErrLaunch, o.NProcPerNode)
	case o.NNodes < 1:
		return fmt.Errorf("%w: nnodes %d < 1", ErrLaunch, o.NNodes)
	case o.NodeRank < 0 || o.NodeRank >= o.NNodes:
		return fmt.Errorf("%w: node rank %d out of range for %d nodes", ErrLaunch, o.NodeRank, o.NNodes)
	case o.MasterPort < 0 || o.MasterPort > 65535:
		return fmt.Errorf("%w: master port %d out of range", ErrLaunch, o.MasterPort)
	case o.MasterPort == 0 && o.NNodes > 1:
		return fmt.Errorf("%w: --master-port is required with %d nodes", ErrLaunch, o.NNodes)
	}
	return nil
}

// pickPort returns a port that was free on host a moment ago.
func pickPort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("comm: pick a master port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Launch runs NProcPerNode children of this node and waits for them. Their output lines
// are prefixed "[rank N] "; SIGINT and SIGTERM are forwarded to them. When one exits
// non-zero or by a signal (or ctx ends), the others get SIGTERM, then SIGKILL after the
// grace period, and Launch returns an error naming the first failing rank ("rank 3
// exited: signal: killed"). It returns nil only when every child exits 0.
//
// After SIGINT or SIGTERM the children's output is held: what they print while stopping
// (each rank's own "interrupted", the links it saw close) is dropped for every child that
// stops as asked (InterruptedStatus, or a stopping signal) and shown for one that fails
// otherwise; Launch then returns ErrInterrupted naming how many ranks it stopped, one line
// for the whole node.
func Launch(ctx context.Context, o LaunchOptions) error {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	if o.MasterPort == 0 {
		host := o.MasterAddr
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			host = ""
		}
		port, err := pickPort(host)
		if err != nil {
			return err
		}
		o.MasterPort = port
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("comm: launch: find own executable: %w", err)
		}
		o.Executable = exe
	}
	base := o.Env
	if base == nil {
		base = os.Environ()
	}
	sigs := o.Signals
	if sigs == nil {
		c := make(chan os.Signal, 4)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(c)
		sigs = c
	}

	envs := o.ChildEnvs()
	var outMu sync.Mutex
	type child struct {
		env            Env
		proc           Process
		stdout, stderr *linePrefixer
		exited         bool
	}
	children := make([]*child, len(envs))
	type exit struct {
		i   int
		err error
	}
	exits := make(chan exit, len(envs))
	var waiters sync.WaitGroup
	defer waiters.Wait()
	for i, e := range envs {
		prefix := "[rank " + strconv.Itoa(e.Rank) + "] "
		c := &child{env: e, stdout: newLinePrefixer(&outMu, o.Stdout, prefix), stderr: newLinePrefixer(&outMu, o.Stderr, prefix)}
		spec := ProcSpec{
			Rank: e.Rank, LocalRank: e.LocalRank, Path: o.Executable,
			Args:   append([]string(nil), o.Command...),
			Env:    append(append([]string(nil), base...), e.Environ()...),
			Stdout: c.stdout, Stderr: c.stderr, OwnSession: o.OwnSessions,
		}
		p, err := o.Start(spec)
		if err != nil {
			for _, s := range children[:i] {
				s.proc.Signal(syscall.SIGKILL)
			}
			for range i {
				<-exits
			}
			return fmt.Errorf("rank %d: %w", e.Rank, err)
		}
		c.proc = p
		children[i] = c
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			exits <- exit{i, p.Wait()}
		}()
	}

	var first error
	var killTimer <-chan time.Time
	stopping, interrupted := false, false
	exitErrs := make([]error, len(children))
	signalLive := func(sig os.Signal) {
		for _, c := range children {
			if !c.exited {
				c.proc.Signal(sig)
			}
		}
	}
	stop := func() {
		if stopping {
			return
		}
		stopping = true
		signalLive(syscall.SIGTERM)
		killTimer = time.After(o.GracePeriod)
	}
	done := ctx.Done()
	for left := len(children); left > 0; {
		select {
		case e := <-exits:
			left--
			c := children[e.i]
			c.exited = true
			c.stdout.Flush()
			c.stderr.Flush()
			exitErrs[e.i] = e.err
			if e.err != nil && first == nil && !interrupted {
				first = fmt.Errorf("rank %d exited: %w", c.env.Rank, e.err)
				stop()
			}
		case sig := <-sigs:
			if !interrupted {
				interrupted = true
				for _, c := range children {
					c.stdout.Hold()
					c.stderr.Hold()
				}
			}
			signalLive(sig)
			if killTimer == nil {
				killTimer = time.After(o.GracePeriod)
			}
		case <-done:
			done = nil
			if first == nil {
				first = fmt.Errorf("comm: launch stopped: %w", ctx.Err())
			}
			stop()
		case <-killTimer:
			killTimer = nil
			signalLive(syscall.SIGKILL)
		}
	}
	if !interrupted {
		return first
	}
	var failed []string
	var stopped []int
	for i, c := range children {
		show := !stoppedBySignal(exitErrs[i])
		c.stdout.Release(show)
		c.stderr.Release(show)
		switch {
		case show:
			failed = append(failed, fmt.Sprintf("rank %d exited: %v", c.env.Rank, exitErrs[i]))
		case exitErrs[i] != nil:
			stopped = append(stopped, c.env.Rank)
		}
	}
	switch {
	case len(failed) > 0:
		return fmt.Errorf("%w; %s", ErrInterrupted, strings.Join(failed, "; "))
	case len(stopped) == 0:
		return nil // every child finished cleanly on the signal (a server shutting down)
	}
	return fmt.Errorf("%w: stopped %s", ErrInterrupted, FormatRanks(stopped))
}
