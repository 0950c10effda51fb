package train

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/cli/clitest"
)

// parseCommand parses args as `vdpp train` does and resolves them.
func parseCommand(t *testing.T, args ...string) (Command, error) {
	t.Helper()
	c := DefaultCommand()
	fs := cli.New("train", nil, nil)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c.Resolve(fs.Given("phase"))
}

// The command's flags, rendered from its flag set (what the training benchmark hands each
// run), parse back to the same options.
func TestCommandArgsRoundTrip(t *testing.T) {
	clitest.RoundTrip(t, DefaultCommand, (*Command).RegisterFlags, Command.Args,
		strings.Fields("--dir d --phase unet --steps 7 --batch 4 --micro-batch 2 --nproc 2 --rule heading --seed 9 --data-seed 3 --lr 1e-3 --ema 0.99 --export out --configs c.json"))
}

// Mistakes are refused before anything runs, as usage errors naming the flag: a decay that
// would start at or after --steps, --model with another phase, --export-only without
// --export, --nproc 0, a --configs file that is not there; --model alone is fine-tuning.
func TestCommandResolve(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	for args, want := range map[string]string{
		"--steps 10 --lr-final 1e-5 --lr-decay-start 10": "lr decay starts at step 10",
		"--model m --phase vae":                          "--model fine-tunes a model folder; --phase vae",
		"--export-only":                                  "--export-only needs --export OUT",
		"--nproc 0":                                      "--nproc 0 < 1",
		"--configs no-such.json":                         "--configs: open no-such.json",
		"--batch 3 --micro-batch 2":                      "--batch 3 is not a whole number of microbatches of 2",
	} {
		_, err := parseCommand(t, append(strings.Fields(args), "--dir", dir)...)
		if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a usage error with %q", args, err, want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused run left %s behind (%v)", dir, err)
	}
	c, err := parseCommand(t, "--model", "m", "--dir", dir)
	if err != nil || c.Phase != PhaseFineTune {
		t.Fatalf("--model: phase %q, %v", c.Phase, err)
	}
	cfg := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(cfg, []byte(`{"VAE": {"latent_channels": 3}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = parseCommand(t, "--configs", cfg, "--rule", "heading", "--dir", dir)
	if err != nil || c.Configs == nil || c.Configs.VAE["latent_channels"] != 3.0 || !reflect.DeepEqual(c.Configs.UNet, TinyConfigs().UNet) || c.Rule != procedural.HeadingRule {
		t.Fatalf("--configs: %+v, %v", c.Configs, err)
	}
	// The benchmark and an export-only run need no valid run options.
	if _, err := parseCommand(t, "--bench", "--steps", "0", "--lr", "0"); err != nil {
		t.Fatalf("--bench: %v", err)
	}
}
