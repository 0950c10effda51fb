package comm_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// ExampleAllGather lays a world of 4 in-process ranks out as a mesh (2 pipeline stages x 2
// guidance halves) and gathers, in every CFG group, each half's rows: uneven shapes are
// fine. The pipeline hand-off from stage 0 to stage 1 shares the links without mixing.
func ExampleAllGather() {
	const world = 4
	mesh, err := comm.NewMesh(2, 2, 1, 1, world)
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := comm.NewLocal(world, comm.Options{})
	ctx := context.Background()
	lines := make([]string, world)
	var wg sync.WaitGroup
	for rank, tr := range ts {
		wg.Go(func() {
			defer tr.Close()
			groups, err := mesh.Groups(tr)
			if err != nil {
				lines[rank] = err.Error()
				return
			}
			c := mesh.Coords(rank)
			// The conditional half (cfg 1) has 2 rows, the unconditional one 1 row.
			rows := make([]float32, 2*(c.CFG+1))
			for i := range rows {
				rows[i] = float32(10*rank + i)
			}
			mine, _ := tensor.FromData(rows, c.CFG+1, 2)
			if c.PP == 0 { // a hand-off to the next stage on the default channel
				tr.Send(ctx, mesh.PPGroup(rank)[1], comm.Message{Sample: int64(rank)})
			} else if m, err := tr.Recv(ctx, mesh.PPGroup(rank)[0]); err == nil {
				defer func() { lines[rank] += fmt.Sprintf(" hand-off from rank %d", m.Sample) }()
			}
			all, err := comm.AllGather(ctx, groups.CFG, mine)
			if err != nil {
				lines[rank] = err.Error()
				return
			}
			lines[rank] = fmt.Sprintf("rank %d %+v %v: %v %v", rank, c, groups.CFG, all[0].Data, all[1].Data)
			comm.Barrier(ctx, groups.CFG) // nobody closes while a peer may still read
		})
	}
	wg.Wait()
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// rank 0 {PP:0 CFG:0 CP:0 DP:0} group cfg [0 1]: [0 1] [10 11 12 13]
	// rank 1 {PP:0 CFG:1 CP:0 DP:0} group cfg [0 1]: [0 1] [10 11 12 13]
	// rank 2 {PP:1 CFG:0 CP:0 DP:0} group cfg [2 3]: [20 21] [30 31 32 33] hand-off from rank 0
	// rank 3 {PP:1 CFG:1 CP:0 DP:0} group cfg [2 3]: [20 21] [30 31 32 33] hand-off from rank 1
}
