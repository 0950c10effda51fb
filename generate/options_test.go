package generate

import (
	"bytes"
	"math/rand/v2"
	"strings"
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

// Every input of the table (knob.AllInputs) is a flag of generate, spelled as errors spell it
// (Input.Spell), with the table's help, in help's input group, setting its own option.
func TestInputFlags(t *testing.T) {
	var o Options
	if n := len(o.inputFields()); n != len(knob.AllInputs) {
		t.Fatalf("%d options hold inputs, the table declares %d", n, len(knob.AllInputs))
	}
	o = DefaultOptions()
	fs := cli.New("generate", nil, nil)
	o.RegisterFlags(fs)
	var args []string
	for _, in := range knob.AllInputs {
		fl := fs.Lookup(in.FlagName())
		if fl == nil || "--"+fl.Name != in.Spell(knob.Flags) || !strings.HasSuffix(fl.Usage, ": "+in.Help) {
			t.Fatalf("input %s: flag %+v", in.Name, fl)
		}
		args = append(args, in.Spell(knob.Flags), "value of "+in.Name)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	for name, p := range o.inputFields() {
		if *p != "value of "+name {
			t.Errorf("input %s: option %q", name, *p)
		}
	}
	var help bytes.Buffer
	fs.Help(&help)
	group, _, _ := strings.Cut(help.String()[strings.Index(help.String(), "\ninput:\n"):], "\nmodel:\n")
	for _, in := range knob.AllInputs {
		if !strings.Contains(group, "  "+in.Spell(knob.Flags)+" ") {
			t.Errorf("help's input group lacks %s:\n%s", in.Spell(knob.Flags), group)
		}
	}
}
