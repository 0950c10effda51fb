package quant

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// docTableRow is a type's row of docs/weights.md's table of weight types.
func docTableRow(in Info) string {
	bits := strconv.FormatFloat(float64(8*in.BlockBytes)/float64(in.BlockSize), 'f', -1, 64)
	fb := "—"
	if in.Quantized {
		fb = "the stored float type"
		if next, ok := fallback[in.Type]; ok {
			fb = next.String()
		}
	}
	return fmt.Sprintf("| `%s` | %s (%d) | %d | %d | %s | %s | %s |", in.Flag, in.Name, uint32(in.Type), in.BlockSize, in.BlockBytes, bits, fb, in.Doc)
}

// TestDocTable: docs/weights.md's table of weight types is this package's table, row for row
// and in its order (the page is derived from the one table; a new type or fallback changes
// both).
func TestDocTable(t *testing.T) {
	data, err := os.ReadFile("../../docs/weights.md")
	if err != nil {
		t.Fatal(err)
	}
	// The table follows its marker comment: a header, a separator, then the rows.
	_, after, ok := strings.Cut(string(data), "<!-- weight types")
	if !ok {
		t.Fatal("docs/weights.md has no <!-- weight types ... --> marker before its table")
	}
	var rows []string
	for i, line := range strings.Split(after, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i >= 2 {
			rows = append(rows, line)
		}
	}
	var want []string
	for _, typ := range Types() {
		in, _ := typ.Info()
		want = append(want, docTableRow(in))
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/weights.md's weight types:\n%s\nwant (from the table):\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
