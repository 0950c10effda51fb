// Command vdpp runs video diffusion models across many processes and devices: pipeline
// parallelism over denoising steps, a simulator, and the benchmarks that measure them.
//
// Usage:
//
//	vdpp generate  [flags]            image in, videos out, as a K-stage pipeline (--model NAME|DIR)
//	vdpp serve     [flags]            jobs over HTTP with K worker processes
//	vdpp loadtest  [flags]            drive a vdpp server with concurrent clients
//	vdpp bench     [flags]            benchmark a K-stage pipeline (or any mesh) against one rank
//	vdpp plan      [flags]            predict and rank meshes (pp x cfg x cp x dp) for a workload
//	vdpp parity    --golden DIR       compare the networks with reference outputs
//	vdpp demo      [flags]            the built-in model on the bundled image, pipeline vs one process
//	vdpp data      [flags]            samples of the procedural video dataset
//	vdpp train     [flags]            train the built-in model on the procedural dataset
//	vdpp eval      [flags]            score a model on held-out procedural clips
//	vdpp compare   A.json B.json      compare two eval reports clip by clip
//	vdpp doctor    [flags]            the GPUs, PJRT plugins and CPU kernel found
//	vdpp unetbench [flags]            time SVD UNet calls with random weights
//	vdpp launch    [flags] -- CMD...  start K workers of this binary (torchrun-style)
//	vdpp worker    JOB [flags]        one rank of a launched job (internal)
//	vdpp version                      print the version
//
// Every command that takes a model takes --model NAME|DIR: a simulator (synthetic,
// dummy), builtin, or a model folder whose model_index.json picks the family.
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
	"regexp"
	"strings"
	"syscall"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/buildinfo"
	"github.com/vdpp/vdpp/internal/cli"
	_ "github.com/vdpp/vdpp/model/families" // every model family and simulator
	"github.com/vdpp/vdpp/model/knob"
)

// command is one subcommand: its name, a one-line summary (the command list), its usage
// line and an example (its -h).
type command struct {
	name, summary string
	usage         string
	examples      []string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"generate", "image or prompt in, videos out, through the K-stage step pipeline",
			"generate --model NAME|DIR (--image FILE | --prompt TEXT) [flags]",
			[]string{"vdpp generate --model builtin --image in.png --num-samples 2 --nproc 2 --out out/gen"}, runGenerate},
		{"serve", "serve video jobs over HTTP (vdpp's API, the OpenAI Videos API, a web page)",
			"serve [--model NAME|DIR] [--listen ADDR] [--nproc K | --pp P [--cfg 2] --dp D | --plan auto] [flags]",
			[]string{"vdpp serve --model builtin --listen 127.0.0.1:8080   # then open http://127.0.0.1:8080"}, runServe},
		{"loadtest", "drive a vdpp server with concurrent clients and report latency",
			"loadtest [--url URL] [flags]",
			[]string{"vdpp loadtest --url http://127.0.0.1:8080 --clients 4 --duration 10s"}, runLoadtest},
		{"bench", "benchmark a K-stage pipeline (or any mesh) against the one-rank baseline",
			"bench --model NAME|DIR [--nproc K | --pp --cfg --cp --dp | --plan auto] [flags]",
			[]string{"vdpp bench --model synthetic --step-ms 1 --steps 28 --nproc 7 --num-samples 60"}, runBench},
		{"plan", "predict and rank parallel meshes (pp x cfg x cp x dp) for a workload",
			"plan --model NAME|DIR --devices N [--goal throughput|latency] [flags]",
			[]string{"vdpp plan --model builtin --devices 4 --goal latency"}, runPlan},
		{"parity", "compare the SVD or Wan networks with reference outputs (golden cases)",
			"parity --golden DIR [--json FILE]",
			[]string{"vdpp parity --golden ../shared/golden/dev"}, runParity},
		{"demo", "the built-in model on the bundled image: pipeline vs one process",
			"demo [--out DIR] [--nproc K] [--num-samples N]",
			[]string{"vdpp demo --num-samples 2"}, runDemo},
		{"data", "write samples of the procedural video dataset and a contact sheet",
			"data [--out DIR] [--split train|heldout] [flags]",
			[]string{"vdpp data --num-samples 8 --out out/data"}, runData},
		{"train", "train the built-in model (VAE, then UNet) on the procedural dataset",
			"train --phase vae|unet [--dir DIR] [flags]",
			[]string{"vdpp train --phase vae --steps 200 --dir out/train"}, runTrain},
		{"eval", "score a model on the held-out procedural clips (PSNR, SSIM, baselines)",
			"eval [--model NAME|DIR] [flags]",
			[]string{"vdpp eval --model builtin --num-samples 8 --json out/eval.json"}, runEval},
		{"compare", "compare two eval reports clip by clip (difference, standard error)",
			"compare A.json B.json",
			[]string{"vdpp compare out/eval-a.json out/eval-b.json"}, runCompare},
		{"doctor", "show the GPUs, PJRT plugins and CPU kernel found and which backend --backend picks",
			"doctor [--backend SPEC] [--try] [--json]",
			[]string{"vdpp doctor --try"}, runDoctor},
		{"unetbench", "time SVD UNet calls with random weights (FLOPs, TFLOP/s)",
			"unetbench [--config xt|FILE] [flags]",
			[]string{"vdpp unetbench --num-frames 14 --height 576 --width 1024 --iters 3"}, runUNetBench},
		{"launch", "start K workers of this binary with torchrun-style variables",
			"launch --nproc-per-node K [--nnodes N --node-rank R --master-addr A --master-port P] -- COMMAND [args...]",
			[]string{"vdpp launch --nproc-per-node 2 -- worker bench --model synthetic --nproc 2 --run-dir /tmp/run"}, runLaunch},
		{"worker", "run one rank of a launched job (internal)",
			"worker JOB [flags]   (JOB: bench, generate, calibrate, serve)", nil, runWorker},
		{"version", "print the version", "version", []string{"vdpp version"}, func(_ context.Context, _ []string, w, _ io.Writer) error {
			_, err := fmt.Fprintln(w, versionString())
			return err
		}},
	}
}

// versionString is "vdpp VERSION (commit C[, modified], GOVERSION)".
func versionString() string { return buildinfo.Read().String() }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		usage(stdout)
		return 0
	case "--version", "-version", "-v":
		fmt.Fprintln(stdout, versionString())
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
		case interrupted(ctx, err):
			// Ctrl-C (or SIGTERM): one word, and what was kept, not the cancellation's
			// path through the code.
			line := "interrupted"
			if kept := keptSamples.FindString(err.Error()); kept != "" {
				line += " " + kept
			}
			// A launcher's own line says which ranks it stopped (and which failed).
			if msg := errorLine(c.name, err); errors.Is(err, comm.ErrInterrupted) {
				line = msg[strings.Index(msg, comm.ErrInterrupted.Error()):]
			}
			fmt.Fprintf(stderr, "vdpp %s: %s\n", c.name, line)
			return comm.InterruptedStatus
		case isUsage(err):
			fmt.Fprintf(stderr, "vdpp %s: %s\n", c.name, errorLine(c.name, err))
			return 2
		default:
			fmt.Fprintf(stderr, "vdpp %s: %s\n", c.name, errorLine(c.name, err))
			return 1
		}
	}
	fmt.Fprintf(stderr, "vdpp: unknown command %q (vdpp help lists the commands)\n", args[0])
	return 2
}

// errUsage marks command-line mistakes (exit status 2).
var errUsage = cli.ErrUsage

// isUsage reports whether err is a command-line mistake: a flag, or options a command
// refuses before it starts.
func isUsage(err error) bool {
	return errors.Is(err, errUsage) // generate.ErrOptions and bench.ErrOptions are usage errors too
}

// errorLine is err's message without the prefixes that repeat the command's name
// ("generate: generate: ...", which wrapping adds layer by layer) or say only that it is
// a usage mistake: "vdpp generate: " is printed before it once. Internal package names and
// repeated paths go too (cli.CleanError), and a built-in model's extracted folder is
// named as the user named it ("builtin-wan", not ~/.cache/vdpp/builtin-wan-<hash>).
func errorLine(name string, err error) string {
	msg := err.Error()
	if ke, ok := knob.AsError(err); ok {
		// A refused job parameter, named as the command line spells it (--cache-branch).
		msg = strings.Replace(msg, ke.Error(), ke.In(knob.Flags), 1)
	}
	msg = builtinNames(cli.CleanError(msg))
	for {
		trimmed := strings.TrimPrefix(msg, name+": ")
		trimmed = strings.TrimPrefix(trimmed, errUsage.Error()+": ")
		if trimmed == msg {
			return msg
		}
		msg = trimmed
	}
}

// builtinNames replaces the extracted folders of the built-in models in msg by their
// names.
func builtinNames(msg string) string {
	if !strings.Contains(msg, builtin.CacheRoot()) {
		return msg
	}
	for _, m := range builtin.Models {
		if dir, err := m.Dir(); err == nil {
			msg = strings.ReplaceAll(msg, dir, m.Name)
		}
	}
	return msg
}

// keptSamples finds what an interrupted generation kept ("(2 finished samples kept in
// out/run-003)").
var keptSamples = regexp.MustCompile(`\(\d+ finished samples? kept in [^)]*\)`)

// interrupted reports whether err ended a command because it was interrupted: the
// command got SIGINT or SIGTERM (its context is cancelled), or a launcher it ran says its
// children were (comm.ErrInterrupted). Whatever error a signalled command ends with is the
// stop's doing: a rank told to stop may see its peer, stopped by the same signal, end the
// job before its own cancellation reaches the code that waits, and it still exits as
// interrupted (status 130), so its launcher counts it stopped, not failed.
func interrupted(ctx context.Context, err error) bool {
	return errors.Is(err, comm.ErrInterrupted) || ctx.Err() != nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: vdpp COMMAND [flags]      (vdpp COMMAND -h: the command's flags and an example)\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
}

// newFlags is the flag set of a command: its usage line, summary and examples from
// commands(); -h prints the help to stdout, deprecation lines go to stderr.
func newFlags(name string, stdout, stderr io.Writer) *cli.FlagSet {
	fs := cli.New(name, stdout, stderr)
	for _, c := range commands() {
		if c.name == name {
			fs.Usage, fs.Summary, fs.Examples = c.usage, c.summary, c.examples
		}
	}
	return fs
}

// newLogger logs to stderr, as text.
func newLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// parseFlags parses args with fs, turning flag errors into errUsage; arguments after the
// flags are refused.
func parseFlags(fs *cli.FlagSet, args []string) error {
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
func parseFlagsAndArgs(fs *cli.FlagSet, args []string) error {
	return fs.Parse(args)
}
