// Command vdpp runs video diffusion models across many processes and devices: pipeline
// parallelism over denoising steps, a simulator, and the benchmarks that measure them.
//
// Usage:
//
//	vdpp bench   [flags]            benchmark a K-stage pipeline against one rank
//	vdpp launch  [flags] -- CMD...  start K workers of this binary (torchrun-style)
//	vdpp worker  JOB [flags]        one rank of a launched job (used by bench/launch)
//	vdpp version
//
// Run `vdpp COMMAND -h` for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/vdpp/vdpp/model/families" // every model family and simulator
)

// command is one subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"bench", "benchmark a K-stage pipeline against the one-rank baseline", runBench},
		{"doctor", "show the GPUs and PJRT plugins found and which backend --backend picks", runDoctor},
		{"unetbench", "time SVD UNet calls with random weights (FLOPs, TFLOP/s)", runUNetBench},
		{"plan", "predict and rank parallel meshes (pp x cfg x cp x dp) for a workload", runPlan},
		{"launch", "start K workers of this binary with torchrun-style variables", runLaunch},
		{"serve", "serve image-to-video jobs over HTTP with K worker processes", runServe},
		{"loadtest", "drive a vdpp server with concurrent clients and report latency", runLoadtest},
		{"generate", "turn an image into videos through the K-stage pipeline", runGenerate},
		{"parity", "compare the SVD or Wan networks with reference outputs (golden cases)", runParity},
		{"data", "write samples of the procedural video dataset and a contact sheet", runData},
		{"train", "train the built-in model (VAE, then UNet) on the procedural dataset", runTrain},
		{"eval", "score a model on the held-out procedural clips (PSNR, SSIM, baselines)", runEval},
		{"compare", "compare two eval reports clip by clip (difference, standard error)", runCompare},
		{"demo", "turn the bundled example image into videos with the built-in model (pipeline vs one process)", runDemo},
		{"worker", "run one rank of a launched job (internal)", runWorker},
		{"version", "print the version", func(_ context.Context, _ []string, w, _ io.Writer) error {
			_, err := fmt.Fprintln(w, "vdpp", version)
			return err
		}},
	}
}

const version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		stopProfile := startProfile(stderr)
		err := c.run(ctx, args[1:], stdout, stderr)
		stopProfile()
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "vdpp %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "vdpp %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "vdpp: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage marks command-line mistakes (exit status 2).
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: vdpp COMMAND [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// newLogger logs to stderr, as text.
func newLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// parseFlags parses args with fs, turning flag errors into errUsage; arguments after the
// flags are refused.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseFlagsAndArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

// parseFlagsAndArgs is parseFlags for commands that take arguments after the flags
// (fs.Args).
func parseFlagsAndArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
