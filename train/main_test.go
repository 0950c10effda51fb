package train

import (
	"os"
	"runtime/debug"
	"testing"
)

// testMemoryLimit is the soft limit on the Go heap of this package's test process. Training
// runs make garbage quickly (every step's graph buffers), and with the default pacing the
// heap, and the race detector's shadow of it, grew to 3.4 GB during TestLatentCache, the
// peak of the whole test suite; under the limit the same tests peak at about half that, at
// a few percent more GC time. A GOMEMLIMIT set by the caller wins.
const testMemoryLimit = 512 << 20

func TestMain(m *testing.M) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(testMemoryLimit)
	}
	os.Exit(m.Run())
}
