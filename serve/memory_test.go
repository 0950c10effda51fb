package serve

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestReleaseMemoryDrainsPools: a buffer left in a sync.Pool (where GoMLX's go backend
// keeps a finished execution's buffers) is freed by releaseMemory, not kept in the pool's
// victim cache as one collection would.
func TestReleaseMemoryDrainsPools(t *testing.T) {
	var pool sync.Pool
	freed := make(chan struct{})
	buf := new([1 << 20]byte)
	runtime.SetFinalizer(buf, func(*[1 << 20]byte) { close(freed) })
	pool.Put(buf)
	buf = nil
	releaseMemory()
	select {
	case <-freed: // finalizers run in their own goroutine after the collection
	case <-time.After(10 * time.Second):
		t.Fatal("a pooled buffer survived releaseMemory")
	}
	runtime.KeepAlive(&pool)
}
