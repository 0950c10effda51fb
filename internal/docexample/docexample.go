// Package docexample finds the vdpp commands in Markdown documentation, so a test can run
// every example a reader may copy (cmd/vdpp's TestDocExamples).
//
// Contract: Extract reads one Markdown text and returns, in order, every command of its
// shell code blocks (fenced with no info string or sh, bash, shell, console; or indented by
// four spaces or more) that runs vdpp: a line starting with `vdpp` or `go run ./cmd/vdpp`,
// after an optional `$ ` prompt and `NAME=value` environment assignments, joined with its
// `\` continuation lines. A command wrapped by another launcher (`torchrun ...
// --no-python vdpp train ...`, `srun vdpp launch ...`; torchrun, srun, mpirun, nice,
// taskset, timeout, time, env) is an example too, with Wrapper set. What else a block holds
// is kept for the runner: the block's variable assignments before the command (Prelude,
// e.g. `G=../shared/golden/wan-dev`), a transcript's output (the lines after a `$ ` command,
// Output), and the other commands it names (Other: `scripts/x.sh ...`, whose path a runner
// can check).
//
// A trailing shell comment (`# ...`, outside quotes) is the example's Comment. Two markers in
// it, both visible to the reader, tell a runner how to treat the example (a comment line of
// its own with a marker applies it to every command after it, up to a blank line):
//
//   - `template: WHY` — the example cannot run as written here (it needs a 30 GB download,
//     a GPU, a cluster, a running server, hours); a runner checks its flags only.
//   - `slow: WHY` — the example runs, but takes long (the full tier runs it).
//
// Extract is pure: it reads nothing but its argument and never fails; lines it does not
// understand are left alone.
package docexample

import (
	"regexp"
	"strings"
)

// Example is one vdpp command of a document.
type Example struct {
	// Line is the 1-based line of the command's first line in the document.
	Line int
	// Prelude are the shell variable assignments (`G=dir; E=$G/x`) earlier in the same
	// block, in order.
	Prelude []string
	// Env are `NAME=value` assignments written before the command on its line.
	Env []string
	// Args is the command after `vdpp` (or `go run ./cmd/vdpp`), continuation lines
	// joined with one space, the trailing comment cut: `generate --model builtin ...`.
	Args string
	// Wrapper is what runs vdpp when another launcher does (`torchrun --nnodes 2 ...
	// --no-python`); "" when the command is vdpp itself.
	Wrapper string
	// Comment is the trailing comment's text after `#` (trimmed); Template and Slow are its
	// markers' explanations ("" when absent).
	Comment  string
	Template string
	Slow     string
	// Transcript says the command was written after a `$ ` prompt; Output are the lines
	// that follow it in the block (until the next command or a blank line), what the
	// reader is told it prints.
	Transcript bool
	Output     []string
}

// Command is the example as a reader would type it (without the prelude).
func (e Example) Command() string {
	var b strings.Builder
	for _, v := range e.Env {
		b.WriteString(v + " ")
	}
	if e.Wrapper != "" {
		b.WriteString(e.Wrapper + " ")
	}
	b.WriteString("vdpp " + e.Args)
	return b.String()
}

// Other is a command of a code block that does not run vdpp (a script, go test, python).
type Other struct {
	Line    int
	Command string
}

// Doc is what Extract found in one document.
type Doc struct {
	Examples []Example
	Others   []Other
}

var (
	// assignment is one NAME=value word (value without spaces, or quoted).
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=("[^"]*"|'[^']*'|[^\s;'"]*)`)
	// vdppStart is the start of a vdpp command.
	vdppStart = regexp.MustCompile(`^(go run \./cmd/vdpp|vdpp)(\s|$)`)
	// wrapped finds a vdpp command started by another launcher (torchrun, srun, ...): the
	// word vdpp later on the line, followed by a subcommand.
	wrapped = regexp.MustCompile(`^((?:torchrun|srun|mpirun|nice|taskset|timeout|time|env)\s.*?\S|(?:torchrun|srun|mpirun|env))\s+(vdpp\s+[a-z].*)$`)
	// marker finds a runner marker in a comment.
	marker = regexp.MustCompile(`\b(template|slow):\s*(.*)$`)
)

// shellInfo reports whether a fence's info string names a shell block.
func shellInfo(info string) bool {
	switch strings.ToLower(strings.Fields(info + " x")[0]) {
	case "x", "sh", "bash", "shell", "console", "zsh":
		return true
	}
	return false
}

// line is a line of a code block with its 1-based number.
type line struct {
	n    int
	text string
}

// Extract returns the vdpp commands of a Markdown document (see the package doc).
func Extract(markdown string) Doc {
	var doc Doc
	lines := strings.Split(strings.ReplaceAll(markdown, "\r\n", "\n"), "\n")
	var block []line
	flush := func() {
		if len(block) > 0 {
			doc.add(block)
		}
		block = nil
	}
	fence, fenceShell := "", false
	prevBlank := true
	inIndented := false
	for i, raw := range lines {
		n := i + 1
		trimmed := strings.TrimSpace(raw)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				if fenceShell {
					flush()
				}
				block, fence = nil, ""
				prevBlank = true
				continue
			}
			if fenceShell {
				block = append(block, line{n, raw})
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" && indentOf(raw) < 4 {
			flush()
			inIndented = false
			fence, fenceShell = f, shellInfo(strings.TrimPrefix(trimmed, strings.Repeat(f[:1], len(f))))
			continue
		}
		switch {
		case trimmed == "":
			if inIndented {
				block = append(block, line{n, ""})
			}
			prevBlank = true
			continue
		case indentOf(raw) >= 4 && (inIndented || prevBlank):
			inIndented = true
			block = append(block, line{n, raw})
		default:
			if inIndented {
				flush()
				inIndented = false
			}
		}
		prevBlank = false
	}
	flush()
	return doc
}

// fenceOf returns the fence a line opens (``` or ~~~, three or more), or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		k := 0
		for k < len(trimmed) && trimmed[k:k+1] == c {
			k++
		}
		if k >= 3 {
			return strings.Repeat(c, k)
		}
	}
	return ""
}

// indentOf is a line's indentation in columns (a tab counts 4).
func indentOf(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}

// add reads one code block's lines.
func (d *Doc) add(block []line) {
	var prelude []string
	var blockTemplate, blockSlow string // markers of comment lines, up to a blank line
	last := -1                          // the transcript command collecting output, an index in d.Examples
	for i := 0; i < len(block); i++ {
		start := block[i].n
		text := strings.TrimSpace(block[i].text)
		if text == "" {
			last = -1
			blockTemplate, blockSlow = "", ""
			continue
		}
		// Join continuation lines.
		for strings.HasSuffix(text, `\`) && i+1 < len(block) {
			i++
			text = strings.TrimSpace(strings.TrimSuffix(text, `\`)) + " " + strings.TrimSpace(block[i].text)
		}
		prompt := false
		if strings.HasPrefix(text, "$ ") {
			prompt = true
			text = strings.TrimSpace(text[2:])
		} else if last >= 0 {
			d.Examples[last].Output = append(d.Examples[last].Output, text)
			continue
		}
		last = -1
		if strings.HasPrefix(text, "#") {
			// A comment line; its marker holds for the rest of the block.
			if kind, why := markerOf(strings.TrimPrefix(text, "#")); kind == "template" {
				blockTemplate = why
			} else if kind == "slow" {
				blockSlow = why
			}
			continue
		}
		code, comment := cutComment(text)
		env, rest := cutAssignments(code)
		if rest == "" && len(env) > 0 {
			prelude = append(prelude, strings.Join(env, "; "))
			continue
		}
		if rest == "" {
			continue
		}
		ex := Example{Line: start, Env: env, Comment: comment, Transcript: prompt, Prelude: append([]string(nil), prelude...),
			Template: blockTemplate, Slow: blockSlow}
		if kind, why := markerOf(comment); kind == "template" {
			ex.Template = why
		} else if kind == "slow" {
			ex.Slow = why
		}
		switch {
		case vdppStart.MatchString(rest):
			ex.Args = strings.TrimSpace(vdppStart.ReplaceAllString(rest, ""))
		default:
			if m := wrapped.FindStringSubmatch(rest); m != nil && vdppStart.MatchString(m[2]) {
				ex.Wrapper = strings.TrimSpace(m[1])
				ex.Args = strings.TrimSpace(vdppStart.ReplaceAllString(m[2], ""))
				break
			}
			d.Others = append(d.Others, Other{Line: start, Command: code})
			continue
		}
		d.Examples = append(d.Examples, ex)
		if prompt {
			last = len(d.Examples) - 1
		}
	}
}

// markerOf returns the marker of a comment ("template" or "slow") and its explanation (the
// marker's name when it gives none).
func markerOf(comment string) (kind, why string) {
	m := marker.FindStringSubmatch(comment)
	if m == nil {
		return "", ""
	}
	why = strings.TrimSpace(m[2])
	if why == "" {
		why = m[1]
	}
	return m[1], why
}

// cutAssignments splits leading NAME=value words (and `;` between them) off a command.
func cutAssignments(s string) (env []string, rest string) {
	rest = strings.TrimSpace(s)
	for {
		m := assignment.FindString(rest)
		if m == "" {
			return env, rest
		}
		after := rest[len(m):]
		if after != "" && after[0] != ' ' && after[0] != ';' && after[0] != '\t' {
			return env, rest
		}
		env = append(env, m)
		rest = strings.TrimLeft(after, " \t;")
	}
}

// cutComment splits a shell line at its first `#` that starts a word outside quotes.
func cutComment(s string) (code, comment string) {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		}
	}
	return strings.TrimSpace(s), ""
}
