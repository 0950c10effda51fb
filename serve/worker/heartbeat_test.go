package worker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/serve/worker"
)

// TestHeartbeat, on a fake clock: the worker pings the coordinator every Heartbeat; a
// coordinator that pings back keeps it going past HeartbeatTimeout; one silent for
// HeartbeatTimeout ends it, with the timeout's error, exactly then.
func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord, conn := net.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- worker.Run(context.Background(), worker.Config{Conn: conn, Heartbeat: time.Second, HeartbeatTimeout: 5 * time.Second,
				Stepper: func(int, string) (*pipeline.Stepper, func(), error) { return nil, nil, errors.New("no model") }})
		}()
		c := wire.NewConn(coord, 0)
		start := time.Now()
		// pings reads the worker's pings until n have come, and returns when each came.
		pings := func(n int) []time.Duration {
			t.Helper()
			var at []time.Duration
			for len(at) < n {
				m, err := c.Recv(0)
				if err != nil {
					t.Fatalf("after pings at %v: %v", at, err)
				}
				if op, _, _ := wire.Op(m); op != wire.OpPing {
					t.Fatalf("op %d, want a ping", op)
				}
				at = append(at, time.Since(start))
			}
			return at
		}
		if at := pings(4); at[0] != time.Second || at[3] != 4*time.Second {
			t.Fatalf("pings at %v, want one a second", at)
		}
		// A ping from the coordinator at 4 s: the worker is still there at 8 s.
		go c.Send(wire.Ping())
		if at := pings(4); at[3] != 8*time.Second {
			t.Fatalf("pings at %v, want 5 s to 8 s", at)
		}
		// Silent since 4 s: the worker gives up at 9 s, its last ping at 8 s.
		go func() {
			for {
				if _, err := c.Recv(0); err != nil {
					return
				}
			}
		}()
		err := <-done
		if d := time.Since(start); d != 9*time.Second || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the worker ended at %v with %v; want at 9 s on the read deadline", d, err)
		}
		c.Close()
	})
}
