package bench

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/cli/clitest"
)

// parseArgs parses args as `vdpp bench` does.
func parseArgs(t *testing.T, args []string) Options {
	t.Helper()
	o := DefaultOptions()
	fs := cli.New("bench", nil, nil)
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return o
}

// A command line parsed, rendered as the workers' arguments and parsed again gives the
// same options; so does every field set at random (a field without a flag would be lost).
func TestWorkerArgsRoundTrip(t *testing.T) {
	o := parseArgs(t, []string{"--model", "synthetic", "--total-steps", "4", "--pp", "2", "--cfg", "2",
		"--step-ms", "0.3", "--no-baseline", "--json", "out/b c.json"})
	if o.TotalSteps != 4 {
		t.Fatalf("--total-steps 4 (the old name of --steps) gave %d steps", o.TotalSteps)
	}
	if back := parseArgs(t, o.WorkerArgs()); !reflect.DeepEqual(back, o) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, o)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		var o Options
		clitest.Fill(&o, r)
		if back := parseArgs(t, o.WorkerArgs()); !reflect.DeepEqual(back, o) {
			t.Fatalf("round trip:\n got %+v\nwant %+v\nargs %q", back, o, o.WorkerArgs())
		}
	}
}
