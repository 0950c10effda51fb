package family

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrNotCached is returned for a Hugging Face model name (ORG/NAME[@REV]) that is not in
// the local Hugging Face cache.
var ErrNotCached = errors.New("family: not in the Hugging Face cache")

// hfName is a Hugging Face model id, ORG/NAME, with an optional @REVISION (a branch, a tag
// or a commit hash).
var hfName = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)/([A-Za-z0-9][A-Za-z0-9._-]*)(?:@([A-Za-z0-9][A-Za-z0-9._/-]*))?$`)

// commitHash is a full git commit id, as snapshot folders are named.
var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// IsHFName reports whether s has the form of a Hugging Face model id, ORG/NAME[@REV].
func IsHFName(s string) bool { return hfName.MatchString(s) }

// HFCacheDir is the Hugging Face hub cache that huggingface_hub downloads into:
// $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (the user's home, os.UserHomeDir).
func HFCacheDir(getenv func(string) string) string {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// ResolveHF finds the model id name (ORG/NAME[@REV]) in the Hugging Face cache of getenv's
// environment (HFCacheDir), offline: the snapshot that refs/REV (refs/main without a
// revision) names, or the snapshot folder of a commit hash. A model or revision that is not
// there is ErrNotCached, in one line naming where it looked and how to fetch it.
func ResolveHF(name string, getenv func(string) string) (string, error) {
	m := hfName.FindStringSubmatch(name)
	if m == nil {
		return "", fmt.Errorf("family: %q is not a Hugging Face model id (ORG/NAME[@REVISION])", name)
	}
	org, model, rev := m[1], m[2], m[3]
	cache := HFCacheDir(getenv)
	repo := filepath.Join(cache, "models--"+org+"--"+model)
	fetch := fmt.Sprintf("vdpp reads the cache offline; fetch it first, e.g. huggingface-cli download %s/%s", org, model)
	if rev != "" {
		fetch += " --revision " + rev
	}
	if _, err := os.Stat(repo); err != nil {
		return "", notCached(fmt.Sprintf("%s/%s is not in the Hugging Face cache (no %s; %s)", org, model, repo, fetch))
	}
	ref := rev
	if ref == "" {
		ref = "main"
	}
	snapshot := ""
	switch b, err := os.ReadFile(filepath.Join(repo, "refs", ref)); {
	case err == nil:
		snapshot = strings.TrimSpace(string(b))
	case commitHash.MatchString(ref):
		snapshot = ref
	case errors.Is(err, fs.ErrNotExist):
		return "", notCached(fmt.Sprintf("%s/%s@%s is not in the Hugging Face cache (no revision %q in %s; %s)", org, model, ref, ref, filepath.Join(repo, "refs"), fetch))
	default:
		return "", fmt.Errorf("family: %s/%s: %w", org, model, err)
	}
	dir := filepath.Join(repo, "snapshots", snapshot)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() || !commitHash.MatchString(snapshot) {
		return "", notCached(fmt.Sprintf("%s/%s@%s is not in the Hugging Face cache (no snapshot %s; %s)", org, model, ref, dir, fetch))
	}
	return dir, nil
}

// notCached is an ErrNotCached whose message is the one line a user reads.
type notCached string

func (e notCached) Error() string        { return string(e) }
func (e notCached) Is(target error) bool { return target == ErrNotCached }
