package atomicfile_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/atomicfile"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	if err := atomicfile.WriteFile(path, []byte("one"), atomicfile.Options{Sync: true}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := atomicfile.Write(path, atomicfile.Options{}, func(w io.Writer) error {
		w.Write([]byte("half of tw"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the writer's error", err)
	}
	b, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if string(b) != "one" || st.Mode().Perm() != 0o644 {
		t.Fatalf("after a failed write: %q, mode %v; want the old content, 0644", b, st.Mode())
	}
	if err := atomicfile.WriteNamed(path, atomicfile.Options{Perm: 0o600}, func(tmp string) error {
		if filepath.Ext(tmp) != ".json" || filepath.Dir(tmp) != dir {
			t.Errorf("temporary file %s: not a .json next to the destination", tmp)
		}
		return os.WriteFile(tmp, []byte("two"), 0o666)
	}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	st, _ = os.Stat(path)
	if string(b) != "two" || st.Mode().Perm() != 0o600 {
		t.Fatalf("%q, mode %v", b, st.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "missing", "x"), nil, atomicfile.Options{}); err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
}
