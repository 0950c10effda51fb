package generate

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/cli/clitest"
)

// parseArgs parses args as `vdpp generate` does.
func parseArgs(t *testing.T, args []string) Options {
	t.Helper()
	o := DefaultOptions()
	fs := cli.New("generate", nil, nil)
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return o
}

// A command line parsed, rendered as the workers' arguments and parsed again gives the
// same options; so does every field set at random (a field without a flag would be lost).
func TestWorkerArgsRoundTrip(t *testing.T) {
	o := parseArgs(t, []string{"--model", "builtin", "--image", "my image.png", "--steps", "4", "--nproc", "2",
		"--min-guidance", "1.25", "--timeout", "90s", "--out", "out/a=b"})
	if back := parseArgs(t, o.WorkerArgs()); !reflect.DeepEqual(back, o) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, o)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		var o Options
		clitest.Fill(&o, r)
		if back := parseArgs(t, o.WorkerArgs()); !reflect.DeepEqual(back, o) {
			t.Fatalf("round trip:\n got %+v\nwant %+v\nargs %q", back, o, o.WorkerArgs())
		}
	}
}
