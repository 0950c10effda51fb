package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/model/wan/wantest"
)

// webScreenshot, when set, receives the web page's screenshot from TestWebPage (the one
// in docs/ is made with -web-screenshot ../../docs/serve-web.png).
var webScreenshot = flag.String("web-screenshot", "", "write TestWebPage's screenshot here")

// webPromptScreenshot, when set, receives TestWebPagePrompt's screenshot (docs/ has one:
// -web-prompt-screenshot ../../docs/serve-web-prompt.png).
var webPromptScreenshot = flag.String("web-prompt-screenshot", "", "write TestWebPagePrompt's screenshot here")

// e2eDir holds the Node end-to-end scripts and their package-lock (the openai SDK and
// playwright-core); `npm ci` there installs them (.ci/run does).
const e2eDir = "testdata/e2e"

// needE2E skips the test when node, the npm modules or the named executables are missing,
// and says so on the terminal when the run ends (skippedE2E); with VDPP_REQUIRE_E2E=1 (CI,
// which installs them) or CI=true it fails instead.
func needE2E(t *testing.T, module string, exes ...string) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node"
	} else if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", module, "package.json")); err != nil {
		missing = "npm module " + module + " (run npm ci in cmd/vdpp/" + e2eDir + ")"
	}
	for _, e := range exes {
		if _, err := os.Stat(e); err != nil && missing == "" {
			missing = e
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("VDPP_REQUIRE_E2E") == "1" || os.Getenv("CI") == "true" {
		t.Fatalf("CI must run this test but %s is missing (see .ci/run)", missing)
	}
	skippedE2E.add(t.Name() + ": " + missing + " is missing")
	t.Skipf("%s is missing", missing)
}

// skippedE2E are the end-to-end tests skipped for lack of their tools, announced when the
// tests end (announceSkips).
var skippedE2E skipList

type skipList struct {
	mu    sync.Mutex
	names []string
}

func (l *skipList) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, s)
}

// announceSkips says which end-to-end tests were skipped, loudly: `go test ./...` shows a
// passing package's output only with -v, so the lines go to the terminal (/dev/tty) too.
func announceSkips() {
	skippedE2E.mu.Lock()
	defer skippedE2E.mu.Unlock()
	if len(skippedE2E.names) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\n*** cmd/vdpp: SKIPPED the OpenAI SDK and browser tests (their tools are missing); CI runs them:\n")
	for _, n := range skippedE2E.names {
		b.WriteString("***   " + n + "\n")
	}
	b.WriteString("*** install them: (cd cmd/vdpp/testdata/e2e && npm ci), Node.js with npm, Chromium at /usr/bin/chromium; VDPP_REQUIRE_E2E=1 fails instead of skipping\n\n")
	os.Stderr.WriteString(b.String())
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		tty.WriteString(b.String())
		tty.Close()
	}
}

// runNode runs a script of e2eDir and fails the test unless it ends with its
// "N passed, 0 failed" line.
func runNode(t *testing.T, timeout time.Duration, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = e2eDir
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", script, out)
	if err != nil || !regexp.MustCompile(`(?m)^\d+ passed, 0 failed$`).Match(out) {
		t.Fatalf("node %s: %v", script, err)
	}
}

// TestOpenAISDK drives the real binary with the official openai npm package (sdk.mjs):
// models, create with an image file and with a data: URL, retrieve to completed, the three
// content variants, auto-pagination both ways, delete, the SDK's typed errors (bad model,
// bad size, missing image, unknown id, bad token) and a 429 the SDK retries after
// Retry-After (one slot, a queue of one).
func TestOpenAISDK(t *testing.T) {
	t.Parallel()
	needE2E(t, "openai")
	url := startServe(t, serveOptions{clean: true}, "--model", "synthetic", "--nproc", "1", "--max-running", "1", "--max-queue", "1",
		"--step-ms", "20", "--api-token", "sdk-token", "--served-model-name", "vdpp-synthetic").url
	img, err := filepath.Abs("../../builtin/example.png")
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, 3*time.Minute, "sdk.mjs", url, img, "sdk-token", "vdpp-synthetic")
}

// TestWebPage drives the web page in Debian's headless Chromium (browser.mjs, with
// playwright-core) against the real binary serving the built-in model with a token. The
// job it cancels is held at its first step by the server's hold file, which the script
// creates before submitting it and removes once the page shows the cancel requested.
func TestWebPage(t *testing.T) {
	t.Parallel()
	chromium := "/usr/bin/chromium"
	if c := os.Getenv("CHROMIUM"); c != "" {
		chromium = c
	}
	needE2E(t, "playwright-core", chromium)
	hold := filepath.Join(t.TempDir(), "hold")
	url := startServe(t, serveOptions{clean: true}, "--model", "builtin", "--nproc", "1", "--api-token", "web-token",
		"--test-hold-file", hold).url
	t.Cleanup(func() { os.Remove(hold) }) // a failed script's hold is lifted before the server stops
	img, err := filepath.Abs("../../builtin/example.png")
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	if *webScreenshot != "" {
		if shot, err = filepath.Abs(*webScreenshot); err != nil {
			t.Fatal(err)
		}
	}
	runNode(t, 6*time.Minute, "browser.mjs", url, img, "web-token", shot, hold)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot: %v", err)
	}
}

// TestWebPagePrompt drives the web page (browser_prompt.mjs) against the real binary
// serving a Wan text-to-video folder (wan-dev's weights with the tiny text encoder): the
// page shows the prompt fields instead of the image, shows the server's validation
// message, and runs a prompt job of two windows at the dev size with two steps.
func TestWebPagePrompt(t *testing.T) {
	t.Parallel()
	chromium := "/usr/bin/chromium"
	if c := os.Getenv("CHROMIUM"); c != "" {
		chromium = c
	}
	needE2E(t, "playwright-core", chromium)
	model := wantest.PromptFolder(t)
	url := startServe(t, serveOptions{clean: true}, "--model", model, "--backend", "go", "--nproc", "1", "--served-model-name", "wan-dev").url
	args := []string{url, "64x64", "2", "13", "9", "4"}
	if *webPromptScreenshot != "" {
		shot, err := filepath.Abs(*webPromptScreenshot)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, shot)
	}
	runNode(t, 3*time.Minute, "browser_prompt.mjs", args...)
}

// TestOpenAISDKWanI2V drives the real binary serving the built-in Wan image-to-video model
// with the official openai SDK (sdk_i2v.mjs): videos.create with a prompt and an
// input_reference returns a completed video, and a create without either is a 400 naming
// the field.
func TestOpenAISDKWanI2V(t *testing.T) {
	t.Parallel()
	needE2E(t, "openai")
	url := startServe(t, serveOptions{clean: true}, "--model", "builtin-wan-i2v", "--backend", "go", "--nproc", "1",
		"--served-model-name", "wan-i2v").url
	img, err := filepath.Abs("../../builtin/example.png")
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, 3*time.Minute, "sdk_i2v.mjs", url, img, "wan-i2v")
}

// TestWebPageWanI2V drives the web page (browser_i2v.mjs) against the real binary serving
// the built-in Wan image-to-video model: the page shows the image and the prompt, refuses a
// job without the image, and makes a video from an image and a prompt.
func TestWebPageWanI2V(t *testing.T) {
	t.Parallel()
	chromium := "/usr/bin/chromium"
	if c := os.Getenv("CHROMIUM"); c != "" {
		chromium = c
	}
	needE2E(t, "playwright-core", chromium)
	url := startServe(t, serveOptions{clean: true}, "--model", "builtin-wan-i2v", "--backend", "go", "--nproc", "1").url
	img, err := filepath.Abs("../../builtin/example.png")
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, 3*time.Minute, "browser_i2v.mjs", url, img)
}
