package checkpoint

import (
	"testing"

	"github.com/vdpp/vdpp/internal/configfuzz"
)

func FuzzParseModelIndex(f *testing.F) {
	f.Add([]byte(tinyIndex))
	f.Add([]byte(`{"x": [null, "y"], "_class_name": null}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ParseModelIndex(configfuzz.FileName, data)
		configfuzz.CheckErr(t, err)
		if err == nil && idx.Components == nil {
			t.Fatal("nil component map")
		}
	})
}

func FuzzParseKeyList(f *testing.F) {
	f.Add([]byte("a\t[1, 2]\nb\t[]\n"))
	f.Add([]byte("a\t[1,,2]"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		order, shapes, err := ParseKeyList(configfuzz.FileName, data)
		configfuzz.CheckErr(t, err)
		if err == nil && len(order) != len(shapes) {
			t.Fatalf("%d names, %d shapes", len(order), len(shapes))
		}
	})
}
