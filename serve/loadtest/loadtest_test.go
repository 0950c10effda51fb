package loadtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	_ "github.com/vdpp/vdpp/model/families" // the synthetic model
	"github.com/vdpp/vdpp/serve"
)

func TestPercentile(t *testing.T) {
	cases := []struct {
		in   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 99, 7},
		{[]float64{1, 2, 3, 4, 5}, 50, 3},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{0, 10}, 95, 9.5},
		{[]float64{1, 2, 3}, 100, 3},
	}
	for _, c := range cases {
		if got := Percentile(c.in, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, u := range []string{"http://10.1.2.3:80", "http://example.com", "ftp://127.0.0.1"} {
		_, err := Run(context.Background(), Options{URL: u, Clients: 1, Duration: time.Second})
		if err == nil {
			t.Errorf("%s: want an error", u)
		}
	}
	_, err := Run(context.Background(), Options{URL: "http://192.168.0.1:8080", Clients: 1, Duration: time.Second})
	if !errors.Is(err, ErrNotLoopback) {
		t.Errorf("want ErrNotLoopback, got %v", err)
	}
}

// TestRunWithKillsAndVerify drives an in-process server while killing ranks: every accepted
// job completes and matches the one-process run.
func TestRunWithKillsAndVerify(t *testing.T) {
	spec := serve.ModelSpec{Name: "synthetic", StepMS: 2}
	srv, err := serve.New(serve.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Spec: spec, NProc: 3, MaxQueue: 4, MaxRunning: 6,
		MaxRestarts: 20, Launcher: serve.InProcLauncher{Spec: spec}, HeartbeatTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatalf("workers never joined: %v", err)
	}
	rep, err := Run(context.Background(), Options{URL: "http://" + srv.Addr(), Clients: 12, Duration: 1500 * time.Millisecond,
		Verify: true, KillEvery: 400 * time.Millisecond, Drain: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	switch {
	case rep.Submitted == 0 || rep.Completed != rep.Submitted || rep.Lost != 0 || rep.Failed != 0:
		t.Fatalf("submitted %d completed %d lost %d failed %d: %v", rep.Submitted, rep.Completed, rep.Lost, rep.Failed, rep.Errors)
	case rep.OutputsVerified == nil || *rep.OutputsVerified != rep.Completed || *rep.OutputsMismatched != 0:
		t.Fatalf("verified %v mismatched %v of %d", rep.OutputsVerified, rep.OutputsMismatched, rep.Completed)
	case rep.Kills < 1:
		t.Fatalf("no kills")
	case rep.Rejected429 == 0:
		t.Fatalf("12 clients on a queue of 4 behind 6 slots: want some 429s")
	case !(rep.P50MS > 0 && rep.P50MS <= rep.P95MS && rep.P95MS <= rep.P99MS && rep.P99MS <= rep.MaxMS):
		t.Fatalf("percentiles out of order: %v %v %v %v", rep.P50MS, rep.P95MS, rep.P99MS, rep.MaxMS)
	}
}

func ExamplePercentile() {
	fmt.Println(Percentile([]float64{10, 20, 30, 40}, 50), Percentile([]float64{10, 20, 30, 40}, 100))
	// Output: 25 40
}
