package serve

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// releaseDelay coalesces the memory releases of jobs ending close together.
const releaseDelay = time.Second

// memRelease returns the heap a finished job (its latents, images, a worker's step
// activations) leaves free to the operating system: Go's scavenger otherwise keeps it for
// minutes, so the process's RSS would stay at its largest job's. At most one release runs
// per releaseDelay, in the background.
var memRelease memReleaser

type memReleaser struct {
	mu      sync.Mutex
	pending bool
}

// soon schedules releaseMemory releaseDelay from now unless one is pending.
func (r *memReleaser) soon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	time.AfterFunc(releaseDelay, func() {
		r.mu.Lock()
		r.pending = false
		r.mu.Unlock()
		releaseMemory()
	})
}

// releaseGCs is how many collections releaseMemory runs before debug.FreeOSMemory's own.
// GoMLX's pure-Go backend keeps the buffers of a finished execution (every intermediate
// tensor of a step, sized by the job's shape) in a sync.Pool per size, on the Go heap;
// a pooled buffer survives its first collection in the pool's victim cache and is freed
// by the second, so one FreeOSMemory (one collection) returned only the Go-side garbage
// and left the pooled activations of the job's shape resident.
const releaseGCs = 2

// releaseMemory frees what the backends' buffer pools hold and returns the free heap to
// the operating system.
func releaseMemory() {
	for range releaseGCs {
		runtime.GC()
	}
	debug.FreeOSMemory()
}
