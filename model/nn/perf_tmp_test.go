package nn

import (
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

func cpuNow() time.Duration {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func TestPerfMatmul(t *testing.T) {
	if os.Getenv("VDPP_PERF") == "" {
		t.Skip()
	}
	r := rand.New(rand.NewPCG(1, 1))
	shapes := [][3]int{{1792, 32, 32}, {1792, 32, 96}, {1792, 32, 256}, {1792, 128, 32}, {1792, 288, 32}, {448, 576, 64}, {112, 1152, 128}, {4096, 288, 32}, {4096, 32, 32}, {14336, 576, 64}, {14336, 64, 512}, {3584, 1152, 128}}
	for _, conf := range []string{"go:ops_sequential", "split"} {
		be, err := backends.NewWithConfig("go:ops_sequential")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shapes {
			m, k, n := s[0], s[1], s[2]
			x, w := randDense(r, m, k), randDense(r, n, k)
			p, _ := NewProgram(be, nil, "mm", func(_ Scope, in []*Node) []*Node {
				if conf == "split" {
					return []*Node{MatMulNT(in[0], in[1])}
				}
				return []*Node{DotGeneral(in[0], []int{1}, nil, in[1], []int{1}, nil)}
			})
			p.Run(x, w)
			reps := max(3, int(2e8/float64(2*m*n*k)))
			c0, w0 := cpuNow(), time.Now()
			for range reps {
				p.Run(x, w)
			}
			cpu, wall := (cpuNow()-c0)/time.Duration(reps), time.Since(w0)/time.Duration(reps)
			f := float64(2 * m * n * k)
			t.Logf("%-40s M%5d K%5d N%4d: cpu %8v wall %8v  %5.2f GFLOP/s-cpu %5.2f GFLOP/s-wall", conf, m, k, n, cpu, wall, f/cpu.Seconds()/1e9, f/wall.Seconds()/1e9)
			p.Close()
		}
	}
	_ = fmt.Sprint
}
