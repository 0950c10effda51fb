package clip

import "github.com/vdpp/vdpp/internal/goldentest"

// The shared golden-data helpers (internal/goldentest), under this package's test names.
var (
	backend     = goldentest.Backend
	goldenDir   = goldentest.Dir
	openGolden  = goldentest.Checkpoint
	readTensors = goldentest.ReadTensors
	goldenCase  = goldentest.Case
	checkClose  = goldentest.CheckClose
)
