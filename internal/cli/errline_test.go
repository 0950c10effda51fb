package cli

import "testing"

func TestCleanError(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`family: unknown model "buitlin" (did you mean builtin?)`, `unknown model "buitlin" (did you mean builtin?)`},
		{"rank 0: stage 0 (steps [0,13)): pipeline: group 2 step 9: family: bad parameters: x", "rank 0: stage 0 (steps [0,13)): group 2 step 9: bad parameters: x"},
		{"/m/model_index.json: checkpoint: bad model_index.json: open /m/model_index.json: no such file or directory",
			"/m/model_index.json: bad model_index.json: no such file or directory"},
		{"--image a.png: video: load image: open a.png: no such file or directory", "--image a.png: load image: no such file or directory"},
		// A path not named before keeps its operation; other words ending in a colon stay.
		{"load image: open a.png: no such file or directory", "load image: open a.png: no such file or directory"},
		{"comm: lost rank 2 (node b): no heartbeat", "comm: lost rank 2 (node b): no heartbeat"},
		{"--model builtin is in the svd family, which does not read it", "--model builtin is in the svd family, which does not read it"},
	} {
		if got := CleanError(c.in); got != c.want {
			t.Errorf("CleanError(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
