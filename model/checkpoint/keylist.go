package checkpoint

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ParseKeyList parses a key list (the state dict of a reference checkpoint): one tensor per line,
// "name<TAB>[d0, d1, ...]" (blank lines ignored). name (the file name) is used in errors.
// It returns the names in file order and the name -> shape map LoadTensors expects.
func ParseKeyList(name string, data []byte) ([]string, map[string][]int, error) {
	var order []string
	shapes := map[string][]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		key, shapeText, ok := strings.Cut(text, "\t")
		key = strings.TrimSpace(key)
		shapeText = strings.TrimSpace(shapeText)
		if !ok || key == "" || !strings.HasPrefix(shapeText, "[") || !strings.HasSuffix(shapeText, "]") {
			return nil, nil, fmt.Errorf("%s:%d: %w: want name<TAB>[shape], got %q", name, line, ErrKeyList, text)
		}
		shape := []int{}
		if inner := strings.TrimSpace(shapeText[1 : len(shapeText)-1]); inner != "" {
			for _, d := range strings.Split(inner, ",") {
				v, err := strconv.Atoi(strings.TrimSpace(d))
				if err != nil || v < 0 {
					return nil, nil, fmt.Errorf("%s:%d: %w: bad dimension %q in %q", name, line, ErrKeyList, d, key)
				}
				shape = append(shape, v)
			}
		}
		if _, dup := shapes[key]; dup {
			return nil, nil, fmt.Errorf("%s:%d: %w: %q listed twice", name, line, ErrKeyList, key)
		}
		order = append(order, key)
		shapes[key] = shape
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %v", name, ErrKeyList, err)
	}
	return order, shapes, nil
}
