package comm

import (
	"bytes"
	"io"
	"sync"
)

// maxPrefixedLine is where a line without a newline is cut and emitted anyway.
const maxPrefixedLine = 64 << 10

// linePrefixer writes whole lines to w, each as one Write starting with prefix, holding
// partial lines until their newline arrives. mu serializes the Writes of every prefixer
// sharing w, so lines of different children never interleave. One goroutine writes to a
// prefixer at a time (exec's copier); Flush is called after it is done.
type linePrefixer struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte // held partial line
	out    []byte // scratch for prefix+line
	// hold (under mu) keeps the lines in kept instead of writing them (Hold).
	hold bool
	kept [][]byte
}

// Hold keeps the lines written from now on instead of writing them, until Release.
func (p *linePrefixer) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = true
}

// Release writes the kept lines (show) or drops them, and writes lines again.
func (p *linePrefixer) Release(show bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if show {
		for _, l := range p.kept {
			p.w.Write(l)
		}
	}
	p.kept, p.hold = nil, false
}

func newLinePrefixer(mu *sync.Mutex, w io.Writer, prefix string) *linePrefixer {
	return &linePrefixer{mu: mu, w: w, prefix: []byte(prefix)}
}

// Write never fails: a destination error must not kill the child with SIGPIPE.
func (p *linePrefixer) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.buf = append(p.buf, b...)
			if len(p.buf) >= maxPrefixedLine {
				p.emit(append(p.buf, '\n'))
				p.buf = p.buf[:0]
			}
			break
		}
		if len(p.buf) > 0 {
			p.buf = append(p.buf, b[:i+1]...)
			p.emit(p.buf)
			p.buf = p.buf[:0]
		} else {
			p.emit(b[:i+1])
		}
		b = b[i+1:]
	}
	return n, nil
}

// Flush writes a held partial line, ending it with a newline.
func (p *linePrefixer) Flush() {
	if len(p.buf) > 0 {
		p.emit(append(p.buf, '\n'))
		p.buf = p.buf[:0]
	}
}

func (p *linePrefixer) emit(line []byte) {
	p.out = append(append(p.out[:0], p.prefix...), line...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold {
		p.kept = append(p.kept, append([]byte(nil), p.out...))
		return
	}
	p.w.Write(p.out)
}
