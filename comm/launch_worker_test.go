package comm

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// workerModeVar makes the test binary act as a launched worker instead of running tests.
const workerModeVar = "VDPP_DIST_TEST_WORKER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(workerModeVar); mode != "" {
		os.Exit(runTestWorker(mode))
	}
	os.Exit(m.Run())
}

// runTestWorker does a rendezvous and a ring exchange over TCP. Mode "ring" then exits 0;
// mode "hang" then waits on its right-hand neighbour, and on failure waits for the
// launcher's SIGTERM before exiting 3: the launcher stops the others only once a rank has
// exited, so the root cause (the killed rank) is always the first exit it sees.
func runTestWorker(mode string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "worker error:", err)
		if mode == "hang" {
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, syscall.SIGTERM)
			<-stop
		}
		return 3
	}
	env, err := EnvFromOS(os.Getenv)
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	if mode == "session" {
		sid, err := unix.Getsid(0)
		if err != nil {
			return fail(err)
		}
		fmt.Printf("session %d pid %d\n", sid, os.Getpid())
		return 0
	}
	if mode == "idle" {
		// Join, say so, then wait on rank 0 until the world ends (liveness tests).
		t, err := Dial(ctx, env, Options{ConnectTimeout: 20 * time.Second, RecvTimeout: time.Hour, HeartbeatTimeout: time.Second})
		if err != nil {
			return fail(err)
		}
		fmt.Println("joined")
		_, err = t.Recv(ctx, 0)
		return fail(err)
	}
	t, err := Dial(ctx, env, Options{ConnectTimeout: 20 * time.Second, RecvTimeout: 20 * time.Second})
	if err != nil {
		return fail(err)
	}
	defer t.Close()
	n, r := env.WorldSize, env.Rank
	lat := mustTensor(nopTB{}, 2, 3)
	lat.Data[0] = float32(r)
	if err := t.Send(ctx, (r+1)%n, Message{Sample: int64(r), Step: 1, Tensors: []NamedTensor{{"latent", lat}}}); err != nil {
		return fail(err)
	}
	m, err := t.Recv(ctx, (r+n-1)%n)
	if err != nil {
		return fail(err)
	}
	if want := (r + n - 1) % n; m.Sample != int64(want) || m.Tensor("latent").Data[0] != float32(want) {
		return fail(fmt.Errorf("got sample %d from rank %d", m.Sample, want))
	}
	fmt.Printf("ring ok pid=%d local=%d/%d\n", os.Getpid(), env.LocalRank, env.LocalWorldSize)
	if mode == "hang" {
		fmt.Println("ready")
		if _, err := t.Recv(ctx, (r+1)%n); err != nil {
			return fail(err)
		}
	}
	return 0
}

// nopTB lets test helpers run in a worker process.
type nopTB struct{ testing.TB }

func (nopTB) Helper() {}
