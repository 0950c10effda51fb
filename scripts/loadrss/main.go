// Command loadrss loads one Wan transformer folder onto the pure-Go backend and prints the
// process's peak resident memory (VmHWM) before and after, with the weight bytes as stored
// and as loaded: what loading a bf16 expert costs the host (scripts/load-rss.sh).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
)

func main() {
	dir := flag.String("dir", "", "a WanTransformer3DModel folder (config.json and its weights)")
	variant := flag.String("variant", "", "weights variant (\"\", fp16, bf16)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("loadrss: -dir is required")
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		log.Fatal(err)
	}
	before := status("VmHWM")
	m, err := transformer.Load(*dir, *variant, b)
	if err != nil {
		log.Fatal(err)
	}
	var stored int64
	files, _ := filepath.Glob(filepath.Join(*dir, "*.safetensors"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			stored += st.Size()
		}
	}
	fmt.Printf("weights file(s) %.0f MB, loaded (float32) %.0f MB, peak RSS before load %.0f MB, after %.0f MB\n",
		float64(stored)/1e6, float64(m.WeightBytes())/1e6, float64(before)/1e6, float64(status("VmHWM"))/1e6)
}

// status returns a /proc/self/status field in bytes (0 where there is none).
func status(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n << 10
	}
	return 0
}
