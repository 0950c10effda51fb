package nn

import (
	"errors"
	"testing"

	"github.com/vdpp/vdpp/model/nn/backendspec"
)

func TestNewBackendSpecs(t *testing.T) {
	cases := []struct {
		spec    string
		wantErr error
	}{
		{"go", nil},
		{"simplego", nil},
		{"xla:/no/such/xla_cuda_plugin.so", backendspec.ErrNoPlugin},
		{"tpu", backendspec.ErrUnknownBackend},
	}
	for _, tc := range cases {
		b, err := NewBackend(tc.spec)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%q: err = %v, want %v", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if !IsSimpleGo(b) {
			t.Errorf("%q: got %s, want simplego", tc.spec, b.Name())
		}
		b.Finalize()
	}
}

func TestSimpleGoConfig(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"go", SimpleGoConfig},
		{"go:", SimpleGoConfig},
		{"go:dotgeneral_large", SimpleGoConfig + ",dotgeneral_large"},
		{"go:ops_parallel,parallelism=4", "go:ops_parallel,parallelism=4"},
	} {
		if got := simpleGoConfig(tc.in); got != tc.want {
			t.Errorf("simpleGoConfig(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
