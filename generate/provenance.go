package generate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/internal/buildinfo"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
)

// FromReportFlag is the flag that re-runs the job a report.json describes.
const FromReportFlag = "from-report"

// jobSkip are the flags that say where and how a run is shown, not what it computes: left
// out of a report's job arguments.
var jobSkip = []string{"out", "overwrite", "quiet", "progress", "progress-dir", FromReportFlag, "cache-check", "model-name", "timeout", "heartbeat-timeout"}

// meshFlags are the flags of the mesh (which processes compute, not what): the PNG and MP4
// parameters leave them out, so a video's files are the same bytes on every mesh.
var meshFlags = []string{"nproc", "pp", "cfg", "cp", "dp", "plan", "goal", "decode-ranks", "decode-steps", "condition-steps", "micro-batch", "backend"}

// JobArgs are the flags that give o's job on model m, as --name=value, sorted: every flag
// whose value differs from DefaultOptions' (the model's defaults filled in by Resolve are
// explicit) except another family's knobs, the model named as given; withMesh keeps the
// mesh flags. Parsed after DefaultOptions they give the same job (vdpp generate
// --from-report).
func (o Options) JobArgs(m family.Resolved, withMesh bool) []string {
	if o.ModelName != "" {
		o.Model = o.ModelName
	}
	skip := slices.Clone(jobSkip)
	if !withMesh {
		skip = append(skip, meshFlags...)
	}
	for _, k := range family.AllKnobs() {
		if !family.Reads(m.Family, k.Name) {
			skip = append(skip, k.FlagName())
		}
	}
	render := func(x Options) []string {
		fs := cli.New("generate", nil, nil)
		x.RegisterFlags(fs)
		return fs.AsArgs(skip...)
	}
	def := map[string]bool{}
	for _, a := range render(DefaultOptions()) {
		def[a] = true
	}
	var out []string
	for _, a := range render(o) {
		if !def[a] {
			out = append(out, a)
		}
	}
	return out
}

// Command is the job as a command line: "vdpp generate --model=builtin-wan --prompt='a
// fox' ...".
func Command(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(append([]string{"vdpp generate"}, q...), " ")
}

// shellSafe are the characters an argument may hold unquoted.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]*$`)

// shellQuote quotes a --name=value argument for a POSIX shell when it needs it.
func shellQuote(a string) string {
	if shellSafe.MatchString(a) {
		return a
	}
	name, value, ok := strings.Cut(a, "=")
	if !ok || !shellSafe.MatchString(name) {
		name, value = "", a
	} else {
		name += "="
	}
	return name + "'" + strings.ReplaceAll(value, "'", `'\''`) + "'"
}

// SchedulerInfo is the scheduler a model folder configures: its config file (relative to
// the folder), class and the config itself.
type SchedulerInfo struct {
	File   string          `json:"file"`
	Class  string          `json:"class,omitempty"`
	Config json.RawMessage `json:"config"`
}

// WeightFile is one weights file of a model folder: its path in the folder, size and
// SHA-256.
type WeightFile struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// LoRAFile is one LoRA a run merged into its denoisers: the file as the run opened it
// (absolute), its strength, the expert it went to, its size and SHA-256.
type LoRAFile struct {
	File     string  `json:"file"`
	Strength float64 `json:"strength"`
	// Expert is the denoiser the LoRA went to: 0 every denoiser (--lora without --lora-2),
	// 1 the first (high-noise) expert of a two-expert model (--lora beside --lora-2), 2
	// the second (--lora-2).
	Expert int    `json:"expert"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Provenance is what report.json says about how a sample was made, besides its
// parameters: the vdpp build, the job as a command (and as the flags --from-report reads),
// the scheduler's config, the weights and the LoRAs by file and hash (or the Hugging Face
// revision).
type Provenance struct {
	Vdpp       buildinfo.Info `json:"vdpp"`
	Command    string         `json:"command"`
	Args       []string       `json:"args"`
	Scheduler  *SchedulerInfo `json:"scheduler,omitempty"`
	Weights    []WeightFile   `json:"weights,omitempty"`
	HFRevision string         `json:"hf_revision,omitempty"`
	LoRAs      []LoRAFile     `json:"lora_weights,omitempty"`

	// parameters is what the video's files carry (Parameters).
	parameters string
}

// Parameters is what a video's files say about how they were made (a PNG frame's
// "parameters" text, the MP4's comment): the job as a command without the mesh (the
// bits are the same on every mesh, and so are the files) and the vdpp build.
func (p Provenance) Parameters() string { return p.parameters }

// provenance returns the Provenance of o's job on the model m (a folder).
func provenance(o Options, m family.Resolved) (Provenance, error) {
	args := o.JobArgs(m, true)
	p := Provenance{Vdpp: buildinfo.Read(), Command: Command(args), Args: args}
	p.parameters = Command(o.JobArgs(m, false)) + "\n" + p.Vdpp.String()
	var err error
	if p.Scheduler, err = schedulerOf(m.Dir); err != nil {
		return p, err
	}
	if p.Weights, p.HFRevision, err = weightsOf(m.Dir); err != nil {
		return p, err
	}
	p.LoRAs, err = lorasOf(o.LoRAs)
	return p, err
}

// lorasOf lists the LoRA files of l with the expert each goes to (family.LoRAs.For), their
// size and SHA-256, hashed as the weights are.
func lorasOf(l family.LoRAs) ([]LoRAFile, error) {
	var out []LoRAFile
	add := func(specs []lora.Spec, expert int) error {
		for _, s := range specs {
			info, err := os.Stat(s.Path)
			if err != nil {
				return fmt.Errorf("generate: LoRA: %w", err)
			}
			sum, err := fileSHA256(s.Path, info)
			if err != nil {
				return err
			}
			out = append(out, LoRAFile{File: s.Path, Strength: s.Strength, Expert: expert, Bytes: info.Size(), SHA256: sum})
		}
		return nil
	}
	first := 0 // every denoiser
	if len(l.LoRA2) > 0 {
		first = 1
	}
	if err := add(l.LoRA, first); err != nil {
		return nil, err
	}
	if err := add(l.LoRA2, 2); err != nil {
		return nil, err
	}
	return out, nil
}

// schedulerOf reads dir/scheduler/scheduler_config.json (nil when the folder has none).
func schedulerOf(dir string) (*SchedulerInfo, error) {
	const file = "scheduler/scheduler_config.json"
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	var head struct {
		Class string `json:"_class_name"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("generate: %s: %w", filepath.Join(dir, file), err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, fmt.Errorf("generate: %s: %w", filepath.Join(dir, file), err)
	}
	return &SchedulerInfo{File: file, Class: head.Class, Config: json.RawMessage(compact.Bytes())}, nil
}

// weightExts are the extensions of weights files.
var weightExts = []string{".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt"}

// hfSnapshot finds a Hugging Face cache snapshot folder: .../snapshots/<revision>.
var hfSnapshot = regexp.MustCompile(`[/\\]snapshots[/\\]([0-9a-f]{40})(?:[/\\]|$)`)

// hexSHA256 is a blob name of the Hugging Face cache: the file's SHA-256.
var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// weightsOf lists the weights files of the folder dir (symbolic links followed) with their
// SHA-256: a Hugging Face cache snapshot's from its blob names (and its revision), other
// files hashed once and remembered by path, size and modification time (hashCache).
func weightsOf(dir string) ([]WeightFile, string, error) {
	rev := ""
	if m := hfSnapshot.FindStringSubmatch(dir); m != nil {
		rev = m[1]
	}
	var out []WeightFile
	err := walkFollow(dir, "", func(rel, path string, info fs.FileInfo) error {
		if !slices.Contains(weightExts, strings.ToLower(filepath.Ext(rel))) {
			return nil
		}
		sum, err := fileSHA256(path, info)
		if err != nil {
			return err
		}
		out = append(out, WeightFile{File: filepath.ToSlash(rel), Bytes: info.Size(), SHA256: sum})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, rev, err
}

// fileSHA256 is the SHA-256 of the file at path (info: its os.Stat): a Hugging Face cache
// blob's name when path links to one, else hashed once and remembered (hashCache).
func fileSHA256(path string, info fs.FileInfo) (string, error) {
	if target, err := filepath.EvalSymlinks(path); err == nil && hexSHA256.MatchString(filepath.Base(target)) {
		return filepath.Base(target), nil
	}
	return hashes.sum(path, info)
}

// walkFollow calls fn for every regular file under root (rel: its path below root),
// following symbolic links to folders and files.
func walkFollow(root, rel string, fn func(rel, path string, info fs.FileInfo) error) error {
	entries, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	for _, e := range entries {
		r := filepath.Join(rel, e.Name())
		p := filepath.Join(root, r)
		info, err := os.Stat(p)
		if err != nil {
			continue // a dangling link is no weights file
		}
		switch {
		case info.IsDir():
			if err := walkFollow(root, r, fn); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := fn(r, p, info); err != nil {
				return err
			}
		}
	}
	return nil
}

// hashCache remembers files' SHA-256 by absolute path, size and modification time, in
// builtin.CacheRoot()/sha256.json, so a model's weights are hashed once.
type hashCache struct {
	mu sync.Mutex
}

var hashes hashCache

type hashEntry struct {
	Bytes   int64  `json:"bytes"`
	ModTime int64  `json:"mtime_ns"`
	SHA256  string `json:"sha256"`
}

func hashCacheFile() string { return filepath.Join(builtin.CacheRoot(), "sha256.json") }

// sum returns path's SHA-256, from the cache when its size and time match.
func (h *hashCache) sum(path string, info fs.FileInfo) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	entries := map[string]hashEntry{}
	if b, err := os.ReadFile(hashCacheFile()); err == nil {
		json.Unmarshal(b, &entries) // an unreadable cache is rebuilt
	}
	if e, ok := entries[abs]; ok && e.Bytes == info.Size() && e.ModTime == info.ModTime().UnixNano() {
		return e.SHA256, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("generate: %w", err)
	}
	defer f.Close()
	d := sha256.New()
	if _, err := io.Copy(d, f); err != nil {
		return "", fmt.Errorf("generate: hash %s: %w", path, err)
	}
	sum := hex.EncodeToString(d.Sum(nil))
	entries[abs] = hashEntry{Bytes: info.Size(), ModTime: info.ModTime().UnixNano(), SHA256: sum}
	if b, err := json.MarshalIndent(entries, "", " "); err == nil {
		if os.MkdirAll(filepath.Dir(hashCacheFile()), 0o755) == nil {
			atomicfile.WriteFile(hashCacheFile(), b, atomicfile.Options{}) // a cache: best effort
		}
	}
	return sum, nil
}

// ReadReport reads a report.json (a sample's, or any file with its fields).
func ReadReport(path string) (SampleReport, error) {
	var rep SampleReport
	b, err := os.ReadFile(path)
	if err != nil {
		return rep, badOptions("--%s: %w", FromReportFlag, err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, badOptions("--%s %s: %w", FromReportFlag, path, err)
	}
	if len(rep.Args) == 0 {
		return rep, badOptions("--%s %s: the report has no job arguments (it was written by an older vdpp)", FromReportFlag, path)
	}
	return rep, nil
}

// ExpandFromReport returns args with the job of a --from-report FILE among them put
// before them: the report's job arguments first, less those of the flags args gives, so a
// flag given on the command line replaces the report's value (--out, --seed), a list flag
// its whole list (--lora B replaces the report's --lora LoRAs, and --lora= drops them).
// Without --from-report, or with -h (help reads no file), it returns args.
func ExpandFromReport(args []string) ([]string, error) {
	path := ""
	for i, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			return args, nil
		}
		for _, p := range []string{"-", "--"} {
			if v, ok := strings.CutPrefix(a, p+FromReportFlag+"="); ok {
				path = v
			} else if a == p+FromReportFlag && i+1 < len(args) {
				path = args[i+1]
			}
		}
		if a == "--" {
			break
		}
	}
	if path == "" {
		return args, nil
	}
	rep, err := ReadReport(path)
	if err != nil {
		return nil, err
	}
	// The flags args gives, parsed alone (a mistake among them is the real parse's to
	// report: what parsed before it still counts).
	given := DefaultOptions()
	fs := cli.New("generate", nil, nil)
	given.RegisterFlags(fs)
	fs.Parse(args)
	if err := checkRecorded(path, rep, fs.Given); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range rep.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !fs.Given(name) {
			out = append(out, a)
		}
	}
	return append(out, args...), nil
}

// checkRecorded refuses the report at path when a file it records by SHA-256 is no longer
// the file at that path (its hash differs, or it is gone), so a re-run does not silently
// make something else: the model folder's weights (Provenance.Weights, under the folder
// the report's --model names) unless given("model"), and each LoRA (Provenance.LoRAs)
// unless given replaces its flag (--lora for experts 0 and 1, --lora-2 for expert 2). The
// hashes come as the report's did (fileSHA256: the Hugging Face blob name, or the hash
// cache by path, size and modification time), so checking unchanged files reads nothing.
func checkRecorded(path string, rep SampleReport, given func(flag string) bool) error {
	changed := func(what, file, recorded, hint string) error {
		current := "missing"
		info, err := os.Stat(file)
		if err == nil {
			if current, err = fileSHA256(file, info); err != nil {
				return badOptions("--%s %s: %s %s: %w", FromReportFlag, path, what, file, err)
			}
		}
		if current == recorded {
			return nil
		}
		return badOptions("--%s %s: %s %s changed since the report: SHA-256 %s now, %s recorded; %s",
			FromReportFlag, path, what, file, current, recorded, hint)
	}
	if len(rep.Weights) > 0 && !given("model") {
		rec := DefaultOptions()
		fs := cli.New("generate", nil, nil)
		rec.RegisterFlags(fs)
		if err := fs.Parse(rep.Args); err != nil {
			return badOptions("--%s %s: the report's job: %w", FromReportFlag, path, err)
		}
		m, err := family.Resolve(rec.Model)
		if err != nil {
			return badOptions("--%s %s: --model %w", FromReportFlag, path, err)
		}
		for _, w := range rep.Weights {
			if err := changed("the model's weights", filepath.Join(m.Dir, filepath.FromSlash(w.File)), w.SHA256,
				fmt.Sprintf("give --model %s to run with the folder as it is now", rec.Model)); err != nil {
				return err
			}
		}
	}
	for _, l := range rep.LoRAs {
		flag := "lora"
		if l.Expert == 2 {
			flag = "lora-2"
		}
		if given(flag) {
			continue
		}
		if err := changed("the LoRA", l.File, l.SHA256, fmt.Sprintf("give --%s to name the LoRAs yourself (it replaces the report's list)", flag)); err != nil {
			return err
		}
	}
	return nil
}
