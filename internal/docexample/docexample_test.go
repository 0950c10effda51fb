package docexample

import (
	"reflect"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name   string
		md     string
		want   []Example
		others []Other
	}{
		{
			name: "fenced sh block, go run and vdpp, comments cut",
			md:   "text\n\n```sh\ngo run ./cmd/vdpp demo   # main job\nvdpp bench --model synthetic\n```\n",
			want: []Example{
				{Line: 4, Args: "demo", Comment: "main job"},
				{Line: 5, Args: "bench --model synthetic"},
			},
		},
		{
			name: "a fence of another language is not a shell block",
			md:   "```json\nvdpp generate\n```\n```go\nvdpp x\n```\n",
		},
		{
			name: "indented block after a blank line; prose that starts with vdpp is not",
			md:   "vdpp ships a model.\n\n    vdpp generate --model builtin --image in.png\n    vdpp plan --devices 2\n\nvdpp runs.\n",
			want: []Example{
				{Line: 3, Args: "generate --model builtin --image in.png"},
				{Line: 4, Args: "plan --devices 2"},
			},
		},
		{
			name: "an indented line inside a paragraph is prose",
			md:   "a paragraph\n    vdpp generate\n",
		},
		{
			name: "continuation lines are joined, the comment of the last one kept",
			md:   "```\nvdpp plan --model synthetic \\\n  --devices 4 \\\n  --json p.json   # the plan\n```\n",
			want: []Example{{Line: 2, Args: "plan --model synthetic --devices 4 --json p.json", Comment: "the plan"}},
		},
		{
			name: "markers in the comment",
			md: "```sh\nvdpp generate --model Org/Big   # 30 GB; template: needs the download\n" +
				"vdpp bench --model synthetic --num-samples 60  # slow: about 40 s\n```\n",
			want: []Example{
				{Line: 2, Args: "generate --model Org/Big", Comment: "30 GB; template: needs the download", Template: "needs the download"},
				{Line: 3, Args: "bench --model synthetic --num-samples 60", Comment: "slow: about 40 s", Slow: "about 40 s"},
			},
		},
		{
			name: "a # inside quotes is not a comment",
			md:   "```sh\nvdpp generate --prompt \"a #1 fox\" --out o   # note\n```\n",
			want: []Example{{Line: 2, Args: "generate --prompt \"a #1 fox\" --out o", Comment: "note"}},
		},
		{
			name: "prelude assignments and environment on the line",
			md:   "```sh\nG=../shared/golden/wan-dev; E=$G/cases/x.safetensors\nGOMLX_BACKEND=go vdpp parity --golden $G\n```\n",
			want: []Example{{Line: 3, Prelude: []string{"G=../shared/golden/wan-dev; E=$G/cases/x.safetensors"}, Env: []string{"GOMLX_BACKEND=go"}, Args: "parity --golden $G"}},
		},
		{
			name: "a transcript keeps its output lines",
			md:   "    $ vdpp generate --model builtin --guidance-scale 9\n    vdpp generate: --guidance-scale applies to wan models\n\n    $ vdpp version\n",
			want: []Example{
				{Line: 1, Args: "generate --model builtin --guidance-scale 9", Transcript: true, Output: []string{"vdpp generate: --guidance-scale applies to wan models"}},
				{Line: 4, Args: "version", Transcript: true},
			},
		},
		{
			name: "wrapped by torchrun and launch",
			md: "    torchrun --nnodes 2 --node_rank R --no-python \\\n        vdpp train --dir run   # template: a cluster\n" +
				"    vdpp launch --nproc-per-node 2 -- \\\n        bench --model dummy\n",
			want: []Example{
				{Line: 1, Wrapper: "torchrun --nnodes 2 --node_rank R --no-python", Args: "train --dir run", Comment: "template: a cluster", Template: "a cluster"},
				{Line: 3, Args: "launch --nproc-per-node 2 -- bench --model dummy"},
			},
		},
		{
			name: "a marker on a comment line holds for the rest of the block",
			md:   "    vdpp version\n    # the training history; template: hours of training\n    vdpp train --steps 1000\n    srun vdpp launch -- train\n\n    vdpp demo\n",
			want: []Example{
				{Line: 1, Args: "version"},
				{Line: 3, Args: "train --steps 1000", Template: "hours of training"},
				{Line: 4, Wrapper: "srun", Args: "launch -- train", Template: "hours of training"},
				{Line: 6, Args: "demo"},
			},
		},
		{
			name:   "a binary built as vdpp, prose naming vdpp, are not vdpp commands",
			md:     "```sh\ngo build -o vdpp ./cmd/vdpp\ninternal/x  every file vdpp writes\n```\n",
			others: []Other{{Line: 2, Command: "go build -o vdpp ./cmd/vdpp"}, {Line: 3, Command: "internal/x  every file vdpp writes"}},
		},
		{
			name:   "other commands are listed, comment lines skipped",
			md:     "```sh\n# a comment\nscripts/gpu-check.sh all   # every phase\ngo test ./...\n```\n",
			others: []Other{{Line: 3, Command: "scripts/gpu-check.sh all"}, {Line: 4, Command: "go test ./..."}},
		},
		{
			name: "an unclosed fence still yields its commands",
			md:   "```sh\nvdpp version",
			want: []Example{{Line: 2, Args: "version"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Extract(tc.md)
			if len(got.Examples) == 0 && len(tc.want) == 0 {
				got.Examples = nil
			}
			if !reflect.DeepEqual(got.Examples, tc.want) {
				t.Errorf("examples:\n got %#v\nwant %#v", got.Examples, tc.want)
			}
			if !reflect.DeepEqual(got.Others, tc.others) {
				t.Errorf("others:\n got %#v\nwant %#v", got.Others, tc.others)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	e := Example{Env: []string{"A=1"}, Wrapper: "torchrun --no-python", Args: "train --dir run"}
	if got, want := e.Command(), "A=1 torchrun --no-python vdpp train --dir run"; got != want {
		t.Fatalf("Command() = %q, want %q", got, want)
	}
}

// FuzzExtract: any text gives examples whose lines are in the text, in order, and whose
// arguments hold no newline.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		"```sh\nvdpp demo\n```\n",
		"    $ vdpp x\n    out\n",
		"```\nvdpp a \\\n b # template: t\n```",
		"~~~bash\nG=1; vdpp x $G\n~~~",
		"\n    torchrun --no-python \\\n    vdpp train\n",
		"```sh\nvdpp \"unclosed # quote\n```",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		d := Extract(md)
		n := strings.Count(md, "\n") + 1
		prev := 0
		for _, e := range d.Examples {
			if e.Line < 1 || e.Line > n || e.Line < prev {
				t.Fatalf("example at line %d (previous %d) of %d lines", e.Line, prev, n)
			}
			prev = e.Line
			if strings.ContainsAny(e.Args, "\n") {
				t.Fatalf("args with a newline: %q", e.Args)
			}
		}
	})
}
