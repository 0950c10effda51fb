// Command tokenizer-bench times vdpp's SentencePiece tokenizer on a corpus:
// it prints strings/s and ids/s for Encode over every string, repeated until
// at least -min seconds have passed. scripts/tokenizer-bench.sh runs it next
// to python3-sentencepiece on the same corpus.
package main

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
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
	start := time.Now()
	strs, ids := 0, 0
	for time.Since(start).Seconds() < *minSeconds {
		for _, s := range c.Strings {
			out, _ := tok.Encode(s)
			ids += len(out)
		}
		strs += len(c.Strings)
	}
	sec := time.Since(start).Seconds()
	fmt.Printf("go      %-28s %9.0f strings/s %10.0f ids/s\n", *model, float64(strs)/sec, float64(ids)/sec)
}
