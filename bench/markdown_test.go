package bench

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// checkGolden compares got with testdata/name, or rewrites it under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestWriteMarkdownGolden(t *testing.T) {
	noBase := sampleReport()
	noBase.BaselineFirstSampleMS, noBase.BaselineSteadySampleMS, noBase.BaselineThroughputSamplesPerS = 0, 0, 0
	noBase.Speedup, noBase.Efficiency = 0, 0
	noBase.EqualToBaseline, noBase.MaxRelL2VsBaseline = nil, nil
	noBase.Command = ""

	differs := sampleReport()
	no := false
	l2 := 3.25e-7
	differs.EqualToBaseline, differs.MaxRelL2VsBaseline = &no, &l2
	differs.Model = "weird|name <x>"
	differs.PerRank = differs.PerRank[:2] // ranks 2 and 3 have stages but no stats

	tests := []struct {
		name   string
		report Report
	}{
		{"full", sampleReport()},
		{"no_baseline", noBase},
		{"differs", differs},
		{"empty", Report{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMarkdown(&buf, tc.report); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "markdown_"+tc.name+".golden", buf.Bytes())
		})
	}
}

// TestWriteMarkdownContent checks facts that must hold whatever the golden files say.
func TestWriteMarkdownContent(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, sampleReport()); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"| first sample (ms) | 345.7 | 310.2 |",
		"| steady (ms / sample) | 90.50 | 308.8 |",
		"| speedup (baseline steady / steady) | 3.41× | |",
		"| efficiency (speedup / processes) | 85.3 % | |",
		"| equal to baseline | yes (bit-identical) | |",
		"| 1 | [7, 13) | 81.2 % | 885.2 | 25.12 | 150.5 |",
		"pp 4 · cfg 1 · cp 1 · dp 1",
		"latent [1×14×4×72×128]",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table row has the same number of cells as its header.
	for _, table := range strings.Split(md, "\n\n") {
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if !strings.HasPrefix(lines[0], "|") {
			continue
		}
		n := strings.Count(lines[0], "|")
		for _, l := range lines[1:] {
			if c := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|"); c != n {
				t.Errorf("row %q has %d pipes, header %d", l, c, n)
			}
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteMarkdownWriteError(t *testing.T) {
	if err := WriteMarkdown(failWriter{}, sampleReport()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err = %v, want the writer's error", err)
	}
}

func TestFmtNum(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{{0, "0"}, {1234.56, "1234.6"}, {12.345, "12.35"}, {1, "1.00"}, {0.1234, "0.123"}, {0.00012, "0.00012"}}
	for _, tc := range tests {
		if got := fmtNum(tc.in); got != tc.want {
			t.Errorf("fmtNum(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
