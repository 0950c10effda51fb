package serve

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/job"
)

// fakeProc runs until killed.
type fakeProc struct {
	done chan struct{}
	once sync.Once
}

func (p *fakeProc) Pid() int { return 7 }
func (p *fakeProc) Wait() error {
	<-p.done
	return errors.New("killed")
}
func (p *fakeProc) Kill() error { p.once.Do(func() { close(p.done) }); return nil }
func (p *fakeProc) Stop() error { return p.Kill() }

// gatedLauncher starts the first process at once and each restart only when gate is
// closed, telling restarting when one waits.
type gatedLauncher struct {
	n          atomic.Int32
	restarting chan int
	gate       chan struct{}
}

func (l *gatedLauncher) Start(rank int, _ string, _ []byte) (Proc, error) {
	if l.n.Add(1) > 1 {
		l.restarting <- rank
		<-l.gate
	}
	return &fakeProc{done: make(chan struct{})}, nil
}

// TestKillRestarting: the admin kill of a rank whose process is being restarted is a
// conflict (409), not a server error, and the rank's info says it is restarting.
func TestKillRestarting(t *testing.T) {
	l := &gatedLauncher{restarting: make(chan int, 1), gate: make(chan struct{})}
	p := &pool{Launcher: l, NProc: 1, MaxRestarts: 3}
	if err := p.Start("addr", nil); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Kill(0); err != nil {
		t.Fatal(err)
	}
	<-l.restarting // the supervisor is starting a new process
	if err := p.Kill(0); !errors.Is(err, job.ErrConflict) {
		t.Fatalf("kill during the restart: %v, want a conflict", err)
	}
	if w := p.Workers(); !w[0].Restarting || w[0].Restarts != 1 {
		t.Fatalf("workers during the restart: %+v", w)
	}
	close(l.gate)
	if !wait.For(10*time.Second, func() bool { return !p.Workers()[0].Restarting }) {
		t.Fatal("the restart never finished")
	}
	if err := p.Kill(0); err != nil {
		t.Fatalf("kill after the restart: %v", err)
	}
}
