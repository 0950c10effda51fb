package openai_test

import (
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
)

// TestDeps: the OpenAI-compatible API translates requests into jobs and statuses into
// answers; it runs no network, keeps no records and talks to no worker.
func TestDeps(t *testing.T) {
	deptest.Check(t, deptest.Rule{
		Package: "github.com/vdpp/vdpp/serve/openai",
		Deps: map[string]string{
			"github.com/gomlx/...":                 "GoMLX: networks run in serve's workers, never in an API",
			"github.com/vdpp/vdpp/model/nn/...":    "vdpp's network layers: the workers' (through the families)",
			"github.com/vdpp/vdpp/internal/sghook": "the CPU kernels: the workers'",
			"github.com/vdpp/vdpp/train/...":       "training is `vdpp train`'s",
			"github.com/vdpp/vdpp/model/svd/...":   "the API sees families only through model/family",
			"github.com/vdpp/vdpp/model/wan/...":   "the API sees families only through model/family",
			"go.etcd.io/bbolt":                     "the job store is the driver's (package serve)",
			"github.com/vdpp/vdpp/serve":           "the driver mounts the API, not the reverse",
			"github.com/vdpp/vdpp/serve/dispatch":  "the API reaches jobs through httpapi's Backend, not the dispatcher",
			"github.com/vdpp/vdpp/serve/wire":      "the worker protocol is the driver's",
			"github.com/vdpp/vdpp/serve/worker":    "the worker is a process of its own",
		},
		Imports: map[string]string{
			"os/...":                    "files and processes are the driver's",
			"syscall":                   "files and processes are the driver's",
			"github.com/vdpp/vdpp/comm": "the API answers HTTP; the driver talks to workers",
		},
	})
}
