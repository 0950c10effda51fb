package backendspec

import (
	"strings"
	"testing"
)

// FuzzResolve checks that any spec either resolves to a configuration GoMLX can parse
// (a registered backend name, then an optional ":config") or fails with an error.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "go", "go:kernels=gemm", "go,kernels=off", "xla:cuda", "xla:cuda,tf32", "xla:/a/b.so", "xla:cpu", "xla", ",", "xla:,", "cuda,,x"} {
		f.Add(s)
	}
	h := fakeHost{files: files(gpuFiles, []string{jaxPlugin, libdevPip}, pipLibs)}
	f.Fuzz(func(t *testing.T, spec string) {
		r, err := Resolve(spec, h.probe())
		if err != nil {
			return
		}
		if r.Config != "go" && r.Config != "xla" && !strings.HasPrefix(r.Config, "xla:") && !strings.HasPrefix(r.Config, "xla,") {
			t.Fatalf("spec %q resolved to config %q", spec, r.Config)
		}
		if (r.Kind == KindGo) != (r.Config == "go") {
			t.Fatalf("spec %q: kind %v with config %q", spec, r.Kind, r.Config)
		}
	})
}
