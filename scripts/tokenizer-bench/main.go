// Command tokenizer-bench times vdpp's SentencePiece tokenizer on a corpus:
// it prints strings/s and ids/s for Encode over every string, repeated until
// at least -min seconds have passed, per wall second and per CPU second. scripts/tokenizer-bench.sh runs it next
// to python3-sentencepiece on the same corpus.
package main

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/text/sentencepiece"
)

func main() {
	model := flag.String("model", "", "spiece.model, tokenizer.json or a folder")
	corpus := flag.String("corpus", "text/sentencepiece/testdata/strings.json.gz", "gzipped JSON {\"strings\": [...]}")
	minSeconds := flag.Float64("min", 3, "measure for at least this many seconds")
	flag.Parse()
	tok, err := sentencepiece.Load(*model)
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.Open(*corpus)
	if err != nil {
		log.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		log.Fatal(err)
	}
	var c struct{ Strings []string }
	if err := json.NewDecoder(zr).Decode(&c); err != nil {
		log.Fatal(err)
	}
	for _, s := range c.Strings { // warm up
		tok.Encode(s)
	}
	start, cpu0 := time.Now(), cpuSeconds()
	strs, ids := 0, 0
	for time.Since(start).Seconds() < *minSeconds {
		for _, s := range c.Strings {
			out, _ := tok.Encode(s)
			ids += len(out)
		}
		strs += len(c.Strings)
	}
	wall, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
	fmt.Printf("go      %-50s %9.0f strings/s %10.0f ids/s  per CPU second: %9.0f strings/s\n",
		*model, float64(strs)/wall, float64(ids)/wall, float64(strs)/cpu)
}

// cpuSeconds is the process' user+system CPU time, which a busy machine
// inflates less than the wall clock.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
