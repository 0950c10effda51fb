package checkpoint

import (
	"strings"
	"testing"
)

// checkErr requires every parser error to name the file and carry a package prefix.
func checkErr(t *testing.T, err error) {
	if err != nil && (!strings.Contains(err.Error(), "fz.json") || !strings.Contains(err.Error(), "checkpoint: ")) {
		t.Fatalf("error does not name the file: %v", err)
	}
}

func FuzzParseModelIndex(f *testing.F) {
	f.Add([]byte(tinyIndex))
	f.Add([]byte(`{"x": [null, "y"], "_class_name": null}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ParseModelIndex("fz.json", data)
		checkErr(t, err)
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
		order, shapes, err := ParseKeyList("fz.json", data)
		checkErr(t, err)
		if err == nil && len(order) != len(shapes) {
			t.Fatalf("%d names, %d shapes", len(order), len(shapes))
		}
	})
}
