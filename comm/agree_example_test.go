package comm_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
)

// ExampleAgreeArgs: rank 0 resolves the options once (here a default read from a model
// would be filled in) and every rank runs with them.
func ExampleAgreeArgs() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	given := []string{"--model", "builtin"}
	got := make([][]string, 2)
	// Rank 0 hosts the store: the ranks close their transports once both have the options.
	transports := make([]*comm.TCPTransport, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			t, err := comm.DialTCP(ctx, comm.Env{Rank: r, WorldSize: 2, LocalRank: r, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}, comm.Options{})
			if err != nil {
				fmt.Println(err)
				return
			}
			transports[r] = t
			got[r], err = comm.AgreeArgs(ctx, t.Store(), r, "example", given, func() ([]string, error) {
				return []string{"--model=builtin", "--steps=25"}, nil
			})
			if err != nil {
				fmt.Println(err)
			}
		})
	}
	wg.Wait()
	for _, t := range transports {
		if t != nil {
			t.Close()
		}
	}
	fmt.Println(got[0], got[1])
	fmt.Println(comm.FormatRanks([]int{2, 3, 5}))
	// Output:
	// [--model=builtin --steps=25] [--model=builtin --steps=25]
	// ranks 2-3, 5
}
