package bench

import (
	"testing"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/cli/clitest"
)

// A command line parsed (the old --total-steps among its flags), rendered as the workers'
// arguments and parsed again gives the same options; so does every field set at random (a
// field without a flag would be lost).
func TestWorkerArgsRoundTrip(t *testing.T) {
	clitest.RoundTrip(t, DefaultOptions, func(o *Options, fs *cli.FlagSet) { o.RegisterFlags(fs) }, Options.WorkerArgs,
		[]string{"--model", "synthetic", "--total-steps", "4", "--pp", "2", "--cfg", "2", "--step-ms", "0.3", "--no-baseline",
			"--json", "out/b c.json"})
}
