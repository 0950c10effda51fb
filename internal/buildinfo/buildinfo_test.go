package buildinfo

import "testing"

func TestString(t *testing.T) {
	for _, c := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "1.2"}, "vdpp 1.2"},
		{Info{Version: "1.2", Go: "go1.26"}, "vdpp 1.2 (go1.26)"},
		{Info{Version: "1.2", Go: "go1.26", Commit: "0123456789abcdef0123"}, "vdpp 1.2 (commit 0123456789ab, go1.26)"},
		{Info{Version: "1.2", Go: "go1.26", Commit: "abc", Modified: true}, "vdpp 1.2 (commit abc, modified, go1.26)"},
	} {
		if got := c.in.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.in, got, c.want)
		}
	}
	if Read().Version != Version {
		t.Fatal("Read lost the version")
	}
}
