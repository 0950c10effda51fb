package cli

import (
	"regexp"
	"strings"
)

// internalPrefix is a Go package's name that wrapping puts before a message ("family:
// unknown model"): what the package is says nothing to the user.
var internalPrefix = regexp.MustCompile(`(^|: |\()(?:family|pipeline|checkpoint|video|builtin|wan|svd|generate|bench|eval|plan|sched|umt5|sentencepiece|safetensors|train|vae|transformer): `)

// pathOp is an *fs.PathError's "op path: " before its cause.
var pathOp = regexp.MustCompile(`(?:open|stat|lstat|read|readdir|readlink|write|mkdir|remove|rename) (\S+): `)

// CleanError returns an error message fit for one line to a user: without the names of
// the internal packages the error passed through ("family: ", "pipeline: ") and without a
// file operation naming a path the message already named ("x/model_index.json: bad
// model_index.json: open x/model_index.json: no such file" loses its second path).
func CleanError(msg string) string {
	for {
		next := internalPrefix.ReplaceAllString(msg, "$1")
		if next == msg {
			break
		}
		msg = next
	}
	var b strings.Builder
	last := 0
	for _, m := range pathOp.FindAllStringSubmatchIndex(msg, -1) {
		path := msg[m[2]:m[3]]
		if strings.Contains(msg[:m[0]], path) {
			b.WriteString(msg[last:m[0]])
			last = m[1]
		}
	}
	b.WriteString(msg[last:])
	return b.String()
}
