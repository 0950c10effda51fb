package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	wanparity "github.com/vdpp/vdpp/model/wan/parity"
)

// A Wan folder is detected from model_index.json: its transformer cases are compared, and
// the cases without a Go runner yet are listed and fail the command, never pass silently.
func TestParityDetectsWan(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	var out, errOut bytes.Buffer
	err := runParity(context.Background(), []string{"--golden", dir, "--backend", "go"}, &out, &errOut)
	if err == nil || !errors.Is(err, wanparity.ErrUnchecked) || errors.Is(err, wanparity.ErrFailed) {
		t.Fatalf("error %v, want ErrUnchecked only\n%s", err, out.String())
	}
	for _, want := range []string{"transformer_forward ", "transformer_2_forward", "transformer_forward_i2v", "not yet checked"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
