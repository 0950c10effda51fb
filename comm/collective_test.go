package comm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

var transportKinds = []struct {
	name  string
	world worldFunc
	fake  bool // in-process: a timeout test runs in a synctest bubble (inBubble)
}{{"local", localWorldFor, true}, {"tcp", tcpWorld, false}}

// onEach runs f for every rank at once and returns the errors by rank.
func onEach(ts []Transport, f func(r int, tr Transport) error) []error {
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for r, tr := range ts {
		wg.Go(func() { errs[r] = f(r, tr) })
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// filled returns a tensor of the given shape (nil: a scalar) whose elements encode seed,
// with fractional parts so that sums round.
func filled(seed int, shape ...int) *tensor.Dense {
	d := &tensor.Dense{Data: make([]float32, tensor.NumElements(shape))}
	if shape != nil {
		d.Shape = slices.Clone(shape)
	}
	for i := range d.Data {
		d.Data[i] = float32(seed)*1.37 + float32(i)*0.001 - 0.3
	}
	return d
}

// unevenShape is member i's all-gather shape: matrices of different heights, scalars and
// empty tensors.
func unevenShape(i int) []int {
	switch i % 3 {
	case 1:
		return nil
	case 2:
		return []int{0, 3}
	}
	return []int{i + 1, 2}
}

// checkCollectives runs every collective once on g and checks the results bit for bit.
func checkCollectives(ctx context.Context, g *Group) error {
	n, me := g.Size(), g.Rank()
	all, err := AllGather(ctx, g, filled(me, unevenShape(me)...))
	if err != nil {
		return err
	}
	for j := range n {
		if want := filled(j, unevenShape(j)...); len(all) != n || !tensor.BitEqual(all[j], want) {
			return fmt.Errorf("all-gather: member %d sent %v, got %v", j, want, all[j])
		}
	}
	parts := make([]*tensor.Dense, n)
	for j := range parts {
		parts[j] = filled(100*me+j, me+1, j+2)
	}
	got, err := AllToAll(ctx, g, parts)
	if err != nil {
		return err
	}
	for j := range n {
		if want := filled(100*j+me, j+1, me+2); !tensor.BitEqual(got[j], want) {
			return fmt.Errorf("all-to-all: from member %d got %v, want %v", j, got[j], want)
		}
	}
	for _, root := range []int{n - 1, 0} {
		var in *tensor.Dense
		if me == root {
			in = filled(7+root, 2, 3, 4)
		}
		b, err := Broadcast(ctx, g, root, in)
		if err != nil {
			return err
		}
		if !tensor.BitEqual(b, filled(7+root, 2, 3, 4)) {
			return fmt.Errorf("broadcast from %d: got %v", root, b)
		}
	}
	if err := Barrier(ctx, g); err != nil {
		return err
	}
	sum, err := AllReduceSum(ctx, g, filled(me, 5, 7))
	if err != nil {
		return err
	}
	want := filled(0, 5, 7)
	for j := 1; j < n; j++ {
		for i, v := range filled(j, 5, 7).Data {
			want.Data[i] += v
		}
	}
	if !tensor.BitEqual(sum, want) {
		return fmt.Errorf("all-reduce-sum differs from the member-ordered sum")
	}
	return nil
}

func TestCollectives(t *testing.T) {
	for _, kind := range transportKinds {
		for n := 1; n <= 8; n++ {
			t.Run(fmt.Sprintf("%s/world%d", kind.name, n), func(t *testing.T) {
				ts := kind.world(t, n, Options{RecvTimeout: 20 * time.Second})
				ctx := context.Background()
				noErrors(t, onEach(ts, func(r int, tr Transport) error {
					g, err := NewGroup(tr, upTo(n))
					if err != nil {
						return err
					}
					for range 2 { // twice: sequence numbers advance in step
						if err := checkCollectives(ctx, g); err != nil {
							return err
						}
					}
					// A sub-group of the odd ranks, in reverse order.
					var odd []int
					for i := n - 1; i >= 0; i-- {
						if i%2 == 1 {
							odd = append(odd, i)
						}
					}
					if r%2 == 1 {
						sg, err := NewGroup(tr, odd)
						if err != nil {
							return err
						}
						if sg.Global(sg.Rank()) != r {
							return fmt.Errorf("sub-group index %d is rank %d", sg.Rank(), sg.Global(sg.Rank()))
						}
						return checkCollectives(ctx, sg)
					}
					return nil
				}))
			})
		}
	}
}

// TestCollectivesLargeTCP moves 2 MiB tensors through all-gather and all-to-all between
// 2..8 processes' worth of TCP links: sends are queued before anyone receives, so nothing
// deadlocks on full sockets.
func TestCollectivesLargeTCP(t *testing.T) {
	type size struct{ n, floats int }
	var sizes []size
	for n := 2; n <= 8; n++ {
		sizes = append(sizes, size{n, 512 << 10}) // 2 MiB
	}
	if testing.Short() || raceEnabled { // the detector makes the codec ~30x slower
		sizes = []size{{2, 512 << 10}, {3, 512 << 10}, {8, 64 << 10}}
	}
	for _, sz := range sizes {
		n, floats := sz.n, sz.floats
		t.Run(fmt.Sprintf("world%d/%dKiB", n, floats>>8), func(t *testing.T) {
			ts := tcpWorld(t, n, Options{RecvTimeout: 30 * time.Second, QueueDepth: 1})
			ctx := context.Background()
			noErrors(t, onEach(ts, func(r int, tr Transport) error {
				g, err := NewGroup(tr, upTo(n))
				if err != nil {
					return err
				}
				mine := filled(r, floats)
				all, err := AllGather(ctx, g, mine)
				if err != nil {
					return err
				}
				for j := range n {
					if all[j].Len() != floats || !tensor.SameShape(all[j], mine) {
						return fmt.Errorf("all-gather: member %d's tensor has shape %v", j, all[j].Shape)
					}
					for _, i := range []int{0, 1, floats / 3, floats - 1} {
						if want := float32(j)*1.37 + float32(i)*0.001 - 0.3; all[j].Data[i] != want {
							return fmt.Errorf("all-gather: member %d's element %d is %v, want %v", j, i, all[j].Data[i], want)
						}
					}
				}
				parts := make([]*tensor.Dense, n)
				for j := range parts {
					parts[j] = mine
				}
				got, err := AllToAll(ctx, g, parts)
				if err != nil {
					return err
				}
				for j := range n {
					if !tensor.BitEqual(got[j], all[j]) {
						return fmt.Errorf("all-to-all: member %d's part differs", j)
					}
				}
				return nil
			}))
		})
	}
}

// TestCollectivesConcurrentGroups runs, on every rank at once, collectives on the mesh's
// CFG and PP groups, on the whole world (which shares pairs with both) and pipeline-style
// default-channel traffic on the same links; nothing is delivered to the wrong receiver.
func TestCollectivesConcurrentGroups(t *testing.T) {
	const rounds = 15
	m, err := NewMesh(2, 2, 1, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range transportKinds {
		t.Run(kind.name, func(t *testing.T) {
			ts := kind.world(t, 4, Options{RecvTimeout: 20 * time.Second, QueueDepth: 2})
			ctx := context.Background()
			noErrors(t, onEach(ts, func(r int, tr Transport) error {
				gs, err := m.Groups(tr)
				if err != nil {
					return err
				}
				world, err := NewGroup(tr, upTo(4))
				if err != nil {
					return err
				}
				var wg sync.WaitGroup
				errs := make([]error, 5)
				wg.Go(func() {
					for i := range rounds {
						all, err := AllGather(ctx, gs.CFG, filled(r*1000+i, 3))
						if err != nil {
							errs[0] = err
							return
						}
						for j, a := range all {
							if !tensor.BitEqual(a, filled(gs.CFG.Global(j)*1000+i, 3)) {
								errs[0] = fmt.Errorf("cfg round %d: member %d sent %v", i, j, a.Data)
								return
							}
						}
					}
				})
				wg.Go(func() {
					for i := range rounds {
						parts := []*tensor.Dense{filled(r*1000+i, 2), filled(r*1000+i+500, 2)}
						got, err := AllToAll(ctx, gs.PP, parts)
						if err != nil {
							errs[1] = err
							return
						}
						for j, a := range got {
							if !tensor.BitEqual(a, filled(gs.PP.Global(j)*1000+i+500*gs.PP.Rank(), 2)) {
								errs[1] = fmt.Errorf("pp round %d: member %d sent %v", i, j, a.Data)
								return
							}
						}
					}
				})
				wg.Go(func() {
					for i := range rounds {
						s, err := AllReduceSum(ctx, world, filled(i, 4))
						if err != nil {
							errs[2] = err
							return
						}
						if s.Data[1] != ((filled(i, 4).Data[1]*2)+filled(i, 4).Data[1])+filled(i, 4).Data[1] {
							errs[2] = fmt.Errorf("world round %d: sum %v", i, s.Data)
							return
						}
					}
				})
				wg.Go(func() { // default channel: a ring, like pipeline hand-offs
					for i := range rounds {
						if err := tr.Send(ctx, (r+1)%4, Message{Sample: int64(i), Step: int32(r)}); err != nil {
							errs[3] = err
							return
						}
					}
				})
				wg.Go(func() {
					for i := range rounds {
						m, err := tr.Recv(ctx, (r+3)%4)
						if err != nil {
							errs[4] = err
							return
						}
						if m.Sample != int64(i) || m.Step != int32((r+3)%4) || m.Tag != 0 {
							errs[4] = fmt.Errorf("hand-off %d: got %+v", i, m)
							return
						}
					}
				})
				wg.Wait()
				return errors.Join(errs...)
			}))
		})
	}
}

// TestCollectiveDeadMember: once a member has closed, every other member's collective
// fails promptly with an error naming the dead rank, and the group stays failed.
func TestCollectiveDeadMember(t *testing.T) {
	const dead = 2
	ops := []struct {
		name string
		run  func(ctx context.Context, g *Group) error
	}{
		{"all-gather", func(ctx context.Context, g *Group) error { _, err := AllGather(ctx, g, filled(1, 3)); return err }},
		{"all-to-all", func(ctx context.Context, g *Group) error {
			_, err := AllToAll(ctx, g, []*tensor.Dense{filled(0, 1), filled(1, 1), filled(2, 1), filled(3, 1)})
			return err
		}},
		{"broadcast", func(ctx context.Context, g *Group) error { _, err := Broadcast(ctx, g, dead, nil); return err }},
		{"barrier", func(ctx context.Context, g *Group) error { return Barrier(ctx, g) }},
		{"all-reduce-sum", func(ctx context.Context, g *Group) error { _, err := AllReduceSum(ctx, g, filled(1, 3)); return err }},
	}
	for _, kind := range transportKinds {
		t.Run(kind.name, func(t *testing.T) {
			ts := kind.world(t, 4, Options{RecvTimeout: 30 * time.Second})
			ts[dead].Close()
			for _, op := range ops {
				t.Run(op.name, func(t *testing.T) {
					re := regexp.MustCompile(`^rank (\d): ` + op.name + ` in group ` + op.name + ` \[0 1 2 3\]: (send to|recv from) rank 2: comm: peer gone`)
					start := time.Now()
					ctx := context.Background()
					errs := onEach(ts, func(r int, tr Transport) error {
						if r == dead {
							return nil
						}
						g, err := NewNamedGroup(tr, op.name, upTo(4))
						if err != nil {
							return err
						}
						err = op.run(ctx, g)
						if err == nil {
							return errors.New("no error")
						}
						if again := op.run(ctx, g); !errors.Is(again, ErrPeerGone) || !regexp.MustCompile(`group unusable after an earlier failure: rank \d: `+op.name).MatchString(again.Error()) {
							return fmt.Errorf("second call on the failed group: %v", again)
						}
						return err
					})
					if d := time.Since(start); d > 5*time.Second {
						t.Fatalf("took %v", d)
					}
					for r, err := range errs {
						if r == dead {
							continue
						}
						if m := re.FindStringSubmatch(fmt.Sprint(err)); m == nil || m[1] != fmt.Sprint(r) || !errors.Is(err, ErrPeerGone) {
							t.Errorf("rank %d: %v", r, err)
						}
					}
				})
			}
		})
	}
}

func TestCollectiveTimeout(t *testing.T) {
	for _, kind := range transportKinds {
		t.Run(kind.name, inBubble(kind.fake, func(t *testing.T) {
			ts := kind.world(t, 3, Options{RecvTimeout: 100 * time.Millisecond})
			ctx := context.Background()
			errs := onEach(ts[:2], func(r int, tr Transport) error { // rank 2 never comes
				g, err := NewGroup(tr, upTo(3))
				if err != nil {
					return err
				}
				start := time.Now()
				err = Barrier(ctx, g)
				if d := time.Since(start); d < 100*time.Millisecond || d > 3*time.Second || kind.fake && d != 100*time.Millisecond {
					return fmt.Errorf("waited %v: %v", d, err)
				}
				return err
			})
			for r, err := range errs {
				want := fmt.Sprintf("rank %d: barrier in group [0 1 2]: recv from rank 2: comm: timeout after 100ms", r)
				if !errors.Is(err, ErrTimeout) || err.Error() != want {
					t.Errorf("rank %d: %v, want %q", r, err, want)
				}
			}
			g, err := NewNamedGroup(ts[0], "x", []int{2, 0})
			if err != nil {
				t.Fatal(err)
			}
			dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			defer cancel()
			if _, err := AllGather(dctx, g, filled(0, 1)); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTimeout) ||
				!regexp.MustCompile(`^rank 0: all-gather in group x \[2 0\]: recv from rank 2: comm: timeout after .+s$`).MatchString(err.Error()) {
				t.Fatalf("ctx deadline: %v", err)
			}
		}))
	}
}

// TestCollectiveMismatch: members calling different collectives fail instead of mixing
// their data.
func TestCollectiveMismatch(t *testing.T) {
	for _, kind := range transportKinds {
		t.Run(kind.name, func(t *testing.T) {
			ts := kind.world(t, 2, Options{RecvTimeout: 5 * time.Second})
			ctx := context.Background()
			errs := onEach(ts, func(r int, tr Transport) error {
				g, err := NewGroup(tr, []int{0, 1})
				if err != nil {
					return err
				}
				if r == 0 {
					_, err = AllGather(ctx, g, filled(0, 2))
				} else {
					err = Barrier(ctx, g)
				}
				return err
			})
			want := []string{
				"rank 0: all-gather in group [0 1]: recv from rank 1: comm: collective mismatch: got barrier #0, want all-gather #0",
				"rank 1: barrier in group [0 1]: recv from rank 0: comm: collective mismatch: got all-gather #0, want barrier #0",
			}
			for r, err := range errs {
				if !errors.Is(err, ErrCollective) || err.Error() != want[r] {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

func TestCollectiveBadArguments(t *testing.T) {
	ts := NewLocal(2, Options{RecvTimeout: time.Second})
	g, err := NewGroup(ts[0], []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
	}{
		{"all-gather nil", func() error { _, err := AllGather(ctx, g, nil); return err }()},
		{"all-to-all count", func() error { _, err := AllToAll(ctx, g, []*tensor.Dense{filled(0, 1)}); return err }()},
		{"all-to-all nil part", func() error { _, err := AllToAll(ctx, g, []*tensor.Dense{filled(0, 1), nil}); return err }()},
		{"broadcast root", func() error { _, err := Broadcast(ctx, g, 2, filled(0, 1)); return err }()},
		{"broadcast nil at root", func() error { _, err := Broadcast(ctx, g, 0, nil); return err }()},
		{"all-reduce nil", func() error { _, err := AllReduceSum(ctx, g, nil); return err }()},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, ErrCollective) {
			t.Errorf("%s: %v", tc.name, tc.err)
		}
	}
	// Nothing was sent: the group still works.
	noErrors(t, onEach(ts, func(r int, tr Transport) error {
		if r == 0 {
			return Barrier(ctx, g)
		}
		g1, err := NewGroup(tr, []int{0, 1})
		if err != nil {
			return err
		}
		return Barrier(ctx, g1)
	}))
	// Shapes that must agree but do not: every member reports it.
	errs := onEach(ts, func(r int, tr Transport) error {
		g, err := NewNamedGroup(tr, "sum", []int{0, 1})
		if err != nil {
			return err
		}
		_, err = AllReduceSum(ctx, g, filled(r, r+1))
		return err
	})
	for r, err := range errs {
		if !errors.Is(err, ErrCollective) || !regexp.MustCompile(`member 1 \(rank 1\) has shape \[2\], member 0 has \[1\]`).MatchString(err.Error()) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestNewGroupRejects(t *testing.T) {
	ts := NewLocal(4, Options{})
	tests := []struct {
		name  string
		tr    Transport
		ranks []int
		want  string
	}{
		{"empty", ts[0], nil, "rank 0: group []: comm: bad group: no members"},
		{"repeat", ts[1], []int{1, 2, 1}, "rank 1: group [1 2 1]: comm: bad group: rank 1 appears twice"},
		{"outside", ts[0], []int{0, 4}, "rank 0: group [0 4]: comm: bad group: rank 4 outside the world of 4"},
		{"negative", ts[0], []int{-1, 0}, "rank 0: group [-1 0]: comm: bad group: rank -1 outside the world of 4"},
		{"not a member", ts[3], []int{0, 1}, "rank 3: group [0 1]: comm: bad group: rank 3 is not a member"},
		{"untagged transport", untagged{ts[0]}, []int{0}, "rank 0: group [0]: comm: bad group: transport comm.untagged has no tagged channels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewGroup(tc.tr, tc.ranks); !errors.Is(err, ErrGroup) || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	g, err := NewGroup(ts[2], []int{3, 2, 0})
	if err != nil || g.Rank() != 1 || g.Size() != 3 || g.Global(0) != 3 || g.Tag() == 0 {
		t.Fatalf("%+v %v", g, err)
	}
	h, _ := NewNamedGroup(ts[2], "other", []int{3, 2, 0})
	r, _ := NewGroup(ts[2], []int{0, 2, 3})
	if h.Tag() == g.Tag() || r.Tag() == g.Tag() {
		t.Fatalf("name and order do not change the channel: %d %d %d", g.Tag(), h.Tag(), r.Tag())
	}
}

// untagged hides the tagged channels of a transport.
type untagged struct{ Transport }

func TestCollectivesNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	ts := tcpWorld(t, 4, Options{RecvTimeout: 10 * time.Second})
	noErrors(t, onEach(ts, func(r int, tr Transport) error {
		g, err := NewGroup(tr, upTo(4))
		if err != nil {
			return err
		}
		return checkCollectives(context.Background(), g)
	}))
	// A collective left waiting when its transport closes returns.
	g, _ := NewGroup(ts[0], upTo(4))
	done := make(chan error, 1)
	go func() { done <- Barrier(context.Background(), g) }()
	waitRecvBlocked(t, ts[0])
	for _, tr := range ts {
		tr.Close()
	}
	if err := <-done; err == nil {
		t.Fatal("barrier without the others succeeded")
	}
	checkGoroutines(t, before)
}

func BenchmarkAllGather(b *testing.B) {
	const n, floats = 4, 64 << 10 // 256 KiB per member
	for _, kind := range []struct {
		name  string
		world func(b *testing.B) []Transport
	}{
		{"local", func(b *testing.B) []Transport { return NewLocal(n, Options{}) }},
		{"tcp", func(b *testing.B) []Transport {
			out := []Transport{}
			for _, tr := range dialWorld(b, n, Options{}) {
				out = append(out, tr)
			}
			return out
		}},
	} {
		b.Run(kind.name, func(b *testing.B) {
			ts := kind.world(b)
			gs := make([]*Group, n)
			for r, tr := range ts {
				gs[r], _ = NewGroup(tr, upTo(n))
			}
			x := filled(1, floats)
			b.SetBytes(int64(4 * floats * n))
			b.ResetTimer()
			for range b.N {
				errs := onEach(ts, func(r int, _ Transport) error { _, err := AllGather(context.Background(), gs[r], x); return err })
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			for _, tr := range ts {
				tr.Close()
			}
		})
	}
}
