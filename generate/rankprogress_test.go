package generate

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/progress"
)

// A rank's last progress report says how it ended: "done" after a finished run, "stopped"
// after an interrupted one, so the launching process's last line after "interrupted" does
// not call the rank done.
func TestRankProgressLastPhase(t *testing.T) {
	for _, c := range []struct {
		name      string
		interrupt bool
		want      progress.Phase
	}{
		{"finished", false, progress.Done},
		{"interrupted", true, progress.Stopped},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := DefaultOptions()
			o.Model, o.Image, o.Out, o.Steps = builtin.Name, "../builtin/example.png", filepath.Join(dir, "out"), 1
			o.Height, o.Width, o.NumFrames = 32, 32, 2 // the test is about the report, not the video
			o.ProgressDir = filepath.Join(dir, "progress")
			if err := os.Mkdir(o.ProgressDir, 0o755); err != nil {
				t.Fatal(err)
			}
			o, err := Resolve(o)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.interrupt {
				cancel()
			}
			err = RunRank(ctx, o, comm.SingleProcess(), slog.New(slog.DiscardHandler))
			if (err != nil) != c.interrupt {
				t.Fatalf("RunRank: %v (interrupted: %v)", err, c.interrupt)
			}
			data, err := os.ReadFile(filepath.Join(o.ProgressDir, "rank-0.json"))
			if err != nil {
				t.Fatal(err)
			}
			var r progress.Rank
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if r.Phase != c.want {
				t.Fatalf("last report %s: phase %q, want %q", data, r.Phase, c.want)
			}
		})
	}
}
