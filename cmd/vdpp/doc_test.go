package main

import (
	"os"
	"strings"
	"testing"
)

// The package doc lists every command.
func TestDocListsEveryCommand(t *testing.T) {
	b, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, ok := strings.Cut(string(b), "package main")
	if !ok {
		t.Fatal("main.go has no package clause")
	}
	for _, c := range commands() {
		if !strings.Contains(doc, "//\tvdpp "+c.name+" ") && !strings.Contains(doc, "//\tvdpp "+c.name+"\n") {
			t.Errorf("the package doc does not list vdpp %s", c.name)
		}
	}
}
