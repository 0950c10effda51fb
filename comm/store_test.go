package comm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startStore(t *testing.T, world int) *Store {
	t.Helper()
	s, err := ListenStore("127.0.0.1:0", world, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dialStore(t *testing.T, s *Store) *StoreClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := DialStore(ctx, s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStoreJoin(t *testing.T) {
	const world = 4
	s := startStore(t, world)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tables := make([]Table, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			tables[r], errs[r] = dialStore(t, s).Join(ctx, r, world, fmt.Sprintf("h:%d", r), fmt.Sprintf("node%d", r))
		})
	}
	wg.Wait()
	for r := range world {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if len(tables[r].Secret) != SecretLen || string(tables[r].Secret) != string(tables[0].Secret) {
			t.Fatalf("rank %d got secret %x, rank 0 %x", r, tables[r].Secret, tables[0].Secret)
		}
		for i, a := range tables[r].Addrs {
			if a != fmt.Sprintf("h:%d", i) || tables[r].Nodes[i] != fmt.Sprintf("node%d", i) {
				t.Fatalf("rank %d table %v %v", r, tables[r].Addrs, tables[r].Nodes)
			}
		}
	}
	// Another store has another secret.
	s2 := startStore(t, 1)
	tb, err := dialStore(t, s2).Join(ctx, 0, 1, "x:1", "")
	if err != nil || string(tb.Secret) == string(tables[0].Secret) {
		t.Fatalf("second store: %v, same secret %v", err, string(tb.Secret) == string(tables[0].Secret))
	}
}

func TestStoreJoinRejects(t *testing.T) {
	s := startStore(t, 2)
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := dialStore(t, s).Join(short, 0, 2, "a:1", "a")
		first <- err
	}()
	// Rank 0's join is registered (it waits for rank 1) before the others try theirs.
	if !wait.For(10*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.joined == 1
	}) {
		t.Fatal("rank 0 never joined")
	}
	tests := []struct {
		name        string
		rank, world int
		addr        string
		want        string
	}{
		{"duplicate rank", 0, 2, "b:1", "already joined"},
		{"rank out of range", 2, 2, "b:1", "out of range"},
		{"negative rank", -1, 2, "b:1", "out of range"},
		{"world disagreement", 1, 3, "b:1", "world size 3"},
		{"no address", 1, 2, "", "no address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dialStore(t, s).Join(context.Background(), tc.rank, tc.world, tc.addr, "")
			if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrStore containing %q", err, tc.want)
			}
		})
	}
	// Rank 0 waits in vain: a timeout that names the missing rank.
	err := <-first
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "1 of 2 ranks arrived; missing rank 1 (arrived: rank 0 from node a)") {
		t.Fatalf("lonely join: %v", err)
	}
}

func TestStoreKV(t *testing.T) {
	s := startStore(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, b := dialStore(t, s), dialStore(t, s)
	stranger := dialStore(t, s)
	if err := stranger.Set(ctx, "k", []byte("v")); !errors.Is(err, ErrStore) {
		t.Fatalf("set before join: %v, want ErrStore", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.Join(ctx, 0, 2, "a:1", "") })
	if _, err := b.Join(ctx, 1, 2, "b:1", ""); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	waited := make(chan string, 1)
	go func() {
		v, err := a.Wait(ctx, "result")
		if err != nil {
			waited <- err.Error()
			return
		}
		waited <- string(v)
	}()
	if _, ok, err := b.Get(ctx, "result"); err != nil || ok {
		t.Fatalf("get missing key: %v %v", ok, err)
	}
	if err := b.Set(ctx, "result", []byte("42")); err != nil {
		t.Fatal(err)
	}
	if got := <-waited; got != "42" {
		t.Fatalf("wait got %q", got)
	}
	if v, ok, err := a.Get(ctx, "result"); err != nil || !ok || string(v) != "42" {
		t.Fatalf("get: %q %v %v", v, ok, err)
	}
	for i, want := range []int64{3, 1} {
		n, err := a.Add(ctx, "ctr", []int64{3, -2}[i])
		if err != nil || n != want {
			t.Fatalf("add %d: %d %v, want %d", i, n, err, want)
		}
	}
	if _, err := a.Add(ctx, "result", 1); err != nil {
		// "42" is a valid counter.
		t.Fatal(err)
	}
	b.Set(ctx, "text", []byte("x"))
	if _, err := a.Add(ctx, "text", 1); !errors.Is(err, ErrStore) {
		t.Fatalf("add to text: %v", err)
	}
	var berrs [2]error
	wg.Go(func() { berrs[0] = a.Barrier(ctx, "b1", 2) })
	berrs[1] = b.Barrier(ctx, "b1", 2)
	wg.Wait()
	if berrs[0] != nil || berrs[1] != nil {
		t.Fatalf("barrier: %v", berrs)
	}
	short, c2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer c2()
	if _, err := a.Wait(short, "never"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("wait for a missing key: %v, want ErrTimeout", err)
	}
}

func TestStoreRejectsOversizedRequest(t *testing.T) {
	s := startStore(t, 1)
	c := dialStore(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A length prefix far beyond the limit: the store hangs up instead of allocating.
	c.conn.Write([]byte{0xff, 0xff, 0xff, 0xff})
	if _, err := c.Join(ctx, 0, 1, "a:1", ""); err == nil {
		t.Fatal("join on a connection the store dropped succeeded")
	}
}

func TestFormatRanks(t *testing.T) {
	for _, tc := range []struct {
		ranks []int
		want  string
	}{
		{nil, "no rank"},
		{[]int{3}, "rank 3"},
		{[]int{0, 1, 2, 3}, "ranks 0-3"},
		{[]int{0, 2, 3, 4, 7}, "ranks 0, 2-4, 7"},
	} {
		if got := FormatRanks(tc.ranks); got != tc.want {
			t.Errorf("FormatRanks(%v) = %q, want %q", tc.ranks, got, tc.want)
		}
	}
}

// While the world is incomplete, rank 0 (hosting the rendezvous) says every
// Options.WaitReport which ranks and which nodes it waits for, and a rank waiting for rank
// 0's rendezvous says so; both stop once the world is complete.
func TestRendezvousReportsWaiting(t *testing.T) {
	lines := make(chan string, 64)
	logger := slog.New(chanHandler{lines})
	port := freePort(t)
	opts := Options{Logger: logger, WaitReport: 5 * time.Millisecond, ConnectTimeout: 20 * time.Second}
	type res struct {
		t   *TCPTransport
		err error
	}
	results := make(chan res, 4)
	dial := func(rank int) {
		go func() {
			tr, err := DialTCP(context.Background(), Env{Rank: rank, WorldSize: 4, LocalRank: rank % 2, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}, opts)
			results <- res{tr, err}
		}()
	}
	// Rank 2 (node-rank 1) first: rank 0's rendezvous is not there yet.
	dial(2)
	waitLine(t, lines, "rank 2: waiting for rank 0's rendezvous at 127.0.0.1:")
	dial(0)
	dial(1)
	waitLine(t, lines, "3 of 4 ranks arrived; waiting for node-rank 1: missing rank 3")
	dial(3)
	for range 4 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.t.Close()
	}
}

// waitLine reads log lines until one contains want (60 s at most).
func waitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no log line with %q", want)
		}
	}
}

// chanHandler sends every record's message to a channel (dropping when it is full).
type chanHandler struct{ c chan<- string }

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.c <- r.Message:
	default:
	}
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }
