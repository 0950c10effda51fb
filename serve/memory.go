package serve

import (
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

// soon schedules a debug.FreeOSMemory releaseDelay from now unless one is pending.
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
		debug.FreeOSMemory()
	})
}
