package generate

import (
	"math/rand/v2"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/cli/clitest"
)

// A command line parsed, rendered as the workers' arguments and parsed again gives the
// same options; so does every field set at random (a field without a flag would be lost).
func TestWorkerArgsRoundTrip(t *testing.T) {
	clitest.RoundTrip(t, DefaultOptions, func(o *Options, fs *cli.FlagSet) { o.RegisterFlags(fs) }, Options.WorkerArgs,
		[]string{"--model", "builtin", "--image", "my image.png", "--steps", "4", "--cfg", "2", "--min-guidance", "1.25",
			"--timeout", "90s", "--out", "out/a=b", "--cache", "fbcache", "--scheduler", "euler-a",
			"--lora", "a.safetensors:0.5", "--lora", "dir/b.safetensors,c.safetensors:-1", "--lora-2", "d.safetensors"},
		func(o *Options, r *rand.Rand) {
			// Every knob in its range, given (a flag refuses a value out of range).
			o.Given = knob.Given{}
			t := family.AllKnobs()
			for _, k := range t {
				if err := t.Set(&o.Params, o.Given, k.Name, k.Random(r)); err != nil {
					panic(err)
				}
			}
		})
}
