package builtin_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/builtin"
)

func ExampleResolve() {
	root, _ := os.MkdirTemp("", "vdpp-example-")
	defer os.RemoveAll(root)
	os.Setenv("VDPP_CACHE_DIR", root)
	dir, err := builtin.Resolve("builtin") // any other value is returned as is
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = os.Stat(filepath.Join(dir, "model_index.json"))
	fmt.Println(err == nil)
	// Output: true
}
