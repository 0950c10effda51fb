package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/configfuzz"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func writeST(t *testing.T, path string, names ...string) {
	t.Helper()
	var ts []safetensors.NamedTensor
	for i, n := range names {
		d := tensor.New(2, 3)
		for j := range d.Data {
			d.Data[j] = float32(10*i + j)
		}
		ts = append(ts, safetensors.NamedTensor{Name: n, Tensor: d})
	}
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const twoShardIndex = `{"metadata": {"total_size": 72}, "weight_map": {
	"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
	"c": "model-00001-of-00002.safetensors"}}`

var abc = map[string][]int{"a": {2, 3}, "b": {2, 3}, "c": {2, 3}}

func TestParseShardIndex(t *testing.T) {
	x, err := ParseShardIndex("i.json", []byte(twoShardIndex))
	if err != nil {
		t.Fatal(err)
	}
	if x.TotalSize != 72 || len(x.WeightMap) != 3 || strings.Join(x.Shards(), ",") != "model-00001-of-00002.safetensors,model-00002-of-00002.safetensors" {
		t.Errorf("parsed %+v, shards %v", x, x.Shards())
	}
	for _, bad := range []string{
		`[]`, `{}`, `{"weight_map": {}}`, `{"weight_map": {"a": 1}}`, `{"weight_map": {"a": "../x.safetensors"}}`,
		`{"weight_map": {"a": "sub/x.safetensors"}}`, `{"weight_map": {"a": "x.bin"}}`, `{"weight_map": {"": "x.safetensors"}}`,
		`{"weight_map": {"a": ".safetensors"}}`, `{"weight_map": {"a": "x.safetensors"}, "metadata": {"total_size": -1}}`,
		`{"weight_map": {"a": "x.safetensors"}, "metadata": {"total_size": "big"}}`,
	} {
		if _, err := ParseShardIndex("i.json", []byte(bad)); !errors.Is(err, ErrShardIndex) || !strings.Contains(err.Error(), "i.json") {
			t.Errorf("%s: error %v, want ErrShardIndex naming the file", bad, err)
		}
	}
}

func TestLoadDirSingleAndSharded(t *testing.T) {
	single := t.TempDir()
	writeST(t, filepath.Join(single, "model.safetensors"), "a", "b", "c")
	sharded := t.TempDir()
	writeST(t, filepath.Join(sharded, "model-00001-of-00002.safetensors"), "a", "c")
	writeST(t, filepath.Join(sharded, "model-00002-of-00002.safetensors"), "b")
	writeFile(t, filepath.Join(sharded, "model.safetensors.index.json"), twoShardIndex)
	for _, dir := range []string{single, sharded} {
		var calls []int64
		var total int64
		got, err := LoadDir(dir, "model", abc, LoadDirOptions{Progress: func(l, tot int64) { calls = append(calls, l); total = tot }})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got["b"].Shape[1] != 3 {
			t.Errorf("%s: loaded %v", dir, got)
		}
		if len(calls) != 3 || calls[2] != total || total != 72 || calls[0] >= calls[1] {
			t.Errorf("%s: progress %v of %d, want 3 increasing calls ending at 72", dir, calls, total)
		}
	}
}

func TestLoadDirErrors(t *testing.T) {
	mk := func(index string, shards map[string][]string) string {
		dir := t.TempDir()
		for f, names := range shards {
			writeST(t, filepath.Join(dir, f), names...)
		}
		if index != "" {
			writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), index)
		}
		return dir
	}
	one, two := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	cases := []struct {
		name, dir string
		want      error
		text      string
	}{
		{"no weights", mk("", nil), ErrWeights, "neither model.safetensors nor model.safetensors.index.json"},
		{"missing shard", mk(twoShardIndex, map[string][]string{one: {"a", "c"}}), ErrShardIndex, "shard model-00002-of-00002.safetensors is missing"},
		{"tensor not in its shard", mk(twoShardIndex, map[string][]string{one: {"a"}, two: {"b", "c"}}), ErrShardIndex, `tensor "c" is not in shard model-00001-of-00002.safetensors`},
		{"shard holds unlisted tensor", mk(twoShardIndex, map[string][]string{one: {"a", "c", "d"}, two: {"b"}}), ErrShardIndex, `holds tensor "d"`},
		{"bad index", mk(`{"weight_map": 3}`, nil), ErrShardIndex, "model.safetensors.index.json"},
		{"missing tensor", mk("", map[string][]string{"model.safetensors": {"a", "b"}}), ErrMissingTensor, `tensor "c": missing`},
		{"unexpected tensor", mk("", map[string][]string{"model.safetensors": {"a", "b", "c", "z"}}), ErrUnexpectedTensor, `tensor "z": unexpected`},
	}
	for _, c := range cases {
		_, err := LoadDir(c.dir, "model", abc, LoadDirOptions{})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: error %v, want %v containing %q", c.name, err, c.want, c.text)
		}
	}
	// Shape mismatches name the index for a sharded folder.
	dir := mk(twoShardIndex, map[string][]string{one: {"a", "c"}, two: {"b"}})
	_, err := LoadDir(dir, "model", map[string][]int{"a": {3, 2}, "b": {2, 3}, "c": {2, 3}}, LoadDirOptions{})
	if !errors.Is(err, ErrShapeMismatch) || !strings.Contains(err.Error(), "index.json") {
		t.Errorf("shape mismatch: %v", err)
	}
	// Ignored names may be present.
	dir = mk("", map[string][]string{"model.safetensors": {"a", "b", "c", "tied"}})
	if _, err := LoadDir(dir, "model", abc, LoadDirOptions{LoadOptions: LoadOptions{Ignore: []string{"tied"}}}); err != nil {
		t.Errorf("ignored tensor: %v", err)
	}
}

func FuzzParseShardIndex(f *testing.F) {
	for _, s := range []string{twoShardIndex, `{}`, `null`, `{"weight_map": {"a": "x.safetensors"}}`, `{"weight_map": {"a": "x.safetensors"}, "metadata": {"total_size": 1e30}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ParseShardIndex("fz.json", data)
		configfuzz.CheckErr(t, err)
		if err != nil {
			return
		}
		if len(x.WeightMap) == 0 || x.TotalSize < 0 {
			t.Fatalf("accepted %+v", x)
		}
		for _, s := range x.Shards() {
			if filepath.Base(s) != s || !strings.HasSuffix(s, ".safetensors") || s == ".." {
				t.Fatalf("accepted shard name %q", s)
			}
		}
	})
}

func TestLoadDirEachMatchesLoadDir(t *testing.T) {
	dir := t.TempDir()
	writeST(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), "a", "c")
	writeST(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), "b")
	writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), twoShardIndex)
	all, err := LoadDir(dir, "model", abc, LoadDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	err = LoadDirEach(dir, "model", abc, LoadDirOptions{}, func(name string, d *tensor.Dense) error {
		order = append(order, name)
		if !tensor.BitEqual(d, all[name]) {
			t.Errorf("%s: %v, LoadDir gave %v", name, d.Data, all[name].Data)
		}
		return nil
	})
	if err != nil || strings.Join(order, ",") != "a,b,c" {
		t.Errorf("order %v, error %v", order, err)
	}
	stop := errors.New("stop")
	if err := LoadDirEach(dir, "model", abc, LoadDirOptions{}, func(string, *tensor.Dense) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("each's error: %v", err)
	}
}
