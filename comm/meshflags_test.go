package comm

import (
	"errors"
	"strings"
	"testing"
)

func TestMeshFromFlags(t *testing.T) {
	tests := []struct {
		nproc, pp, cfg, cp, dp, def int
		want                        Mesh
		err                         string
	}{
		{0, 0, 0, 0, 0, 7, Mesh{7, 1, 1, 1}, ""},
		{3, 0, 0, 0, 0, 7, Mesh{3, 1, 1, 1}, ""},
		{0, 2, 2, 0, 0, 1, Mesh{2, 2, 1, 1}, ""},
		{8, 0, 2, 0, 2, 1, Mesh{2, 2, 1, 2}, ""}, // pp takes what --nproc leaves
		{4, 0, 0, 4, 0, 1, Mesh{1, 1, 4, 1}, ""},
		{0, 0, 0, 0, 0, 0, Mesh{}, "--nproc 0: a run needs at least 1 process"},
		{5, 2, 2, 0, 0, 1, Mesh{}, "--nproc 5 but --pp 2 x --cfg 2 x --cp 1 x --dp 1 = 4 processes"},
		{0, -1, 2, 0, 0, 1, Mesh{}, "--pp -1: every degree must be at least 1"},
	}
	for _, tc := range tests {
		m, err := MeshFromFlags(tc.nproc, tc.pp, tc.cfg, tc.cp, tc.dp, tc.def)
		switch {
		case tc.err == "" && (err != nil || m != tc.want):
			t.Errorf("%+v: %v, %v; want %v", tc, m, err, tc.want)
		case tc.err != "" && (!errors.Is(err, ErrMesh) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: %v, want ErrMesh with %q", tc, err, tc.err)
		}
	}
}
