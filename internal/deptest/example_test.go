package deptest_test

import (
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
)

// A package states what it must not depend on, with the reasons, in a test of its own.
func ExampleCheck() {
	t := &testing.T{} // in a real test: the test's t
	deptest.Check(t, deptest.Rule{
		Package: "github.com/vdpp/vdpp/tensor",
		Deps:    map[string]string{"github.com/gomlx/...": "tensors are plain Go slices"},
		Imports: map[string]string{"os": "tensor does no I/O"},
	})
}
