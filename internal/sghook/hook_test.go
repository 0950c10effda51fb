package sghook

import "testing"

// TestInstall fails when vdpp's hooks no longer fit the GoMLX in go.mod: the sign that an
// upgrade changed simplego's internals (see the package documentation).
func TestInstall(t *testing.T) {
	if err := Install(All); err != nil {
		t.Fatal(err)
	}
	if got := Installed(); got != All {
		t.Fatalf("Installed() = %b, want %b", got, All)
	}
}
