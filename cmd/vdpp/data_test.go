package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestDataCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := runData(context.Background(), []string{"--out", dir, "--n", "2", "--split", "heldout"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	for _, p := range []string{"heldout_sheet.png", "heldout/00000/000.png", "heldout/00001/013.png"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Error(err)
		}
	}
	if err := runData(context.Background(), []string{"--out", dir, "--split", "dev"}, &out, &errb); err == nil {
		t.Error("unknown split accepted")
	}
}
