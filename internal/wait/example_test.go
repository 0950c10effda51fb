package wait_test

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
)

// A test waits for what it can observe (here a flag another goroutine sets) instead of
// sleeping a guessed while.
func ExampleFor() {
	var done atomic.Bool
	go done.Store(true)
	if !wait.For(10*time.Second, done.Load) {
		fmt.Println("never done")
		return
	}
	fmt.Println("done")
	// Output: done
}
