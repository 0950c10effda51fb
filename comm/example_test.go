package comm_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// ExampleDial joins a two-rank TCP world (both ranks in this process for the example; in
// a job each rank is a process and reads its Env with EnvFromOS(os.Getenv)).
func ExampleDial() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Go(func() {
			env := comm.Env{Rank: rank, WorldSize: 2, LocalRank: rank, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}
			t, err := comm.Dial(ctx, env, comm.Options{RecvTimeout: 5 * time.Second})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer t.Close()
			if rank == 0 {
				latent, _ := tensor.FromData([]float32{0.5, -1}, 1, 2)
				t.Send(ctx, 1, comm.Message{Sample: 3, Step: 10, Tensors: []comm.NamedTensor{{Name: "latent", Tensor: latent}}})
				t.Recv(ctx, 1) // wait for the answer before closing
				return
			}
			m, err := t.Recv(ctx, 0)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println("rank 1 got sample", m.Sample, "step", m.Step, m.Tensor("latent").Data)
			t.Send(ctx, 0, comm.Message{Sample: m.Sample})
		})
	}
	wg.Wait()
	// Output: rank 1 got sample 3 step 10 [0.5 -1]
}
