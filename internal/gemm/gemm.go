package gemm

import (
	"fmt"
	"runtime"
	"sync"
)

const (
	tileRows = 4  // rows of A (and C) one kernel call covers
	tileCols = 16 // rows of B (columns of C) one packed panel covers

	// parallelWork is the number of multiply-adds above which MulNT splits its rows over
	// goroutines: below it the hand-off costs more than a second core saves.
	parallelWork = 1 << 21
)

// Accelerated reports whether MulNT runs the AVX2/FMA assembly kernel on this CPU.
func Accelerated() bool { return accelerated }

// MulNT sets c[i*n+j] = Σ_p a[i*k+p]·b[j*k+p] for i < m, j < n: C = A·Bᵀ with A [m, k],
// B [n, k] and C [m, n] row-major. Large products split their rows over up to GOMAXPROCS
// goroutines; the result is the same bits however they are split. It panics if a slice
// is shorter than its shape says.
func MulNT(m, n, k int, a, b, c []float32) {
	if m < 0 || n < 0 || k < 0 || len(a) < m*k || len(b) < n*k || len(c) < m*n {
		panic(fmt.Sprintf("gemm: MulNT(%d, %d, %d) with len(a)=%d len(b)=%d len(c)=%d",
			m, n, k, len(a), len(b), len(c)))
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		clear(c[:m*n])
		return
	}
	panels := getScratch(panelsLen(n, k))
	defer putScratch(panels)
	pack(n, k, b, *panels)

	workers := 1
	if m*n*k >= parallelWork {
		workers = min(runtime.GOMAXPROCS(0), (m+tileRows-1)/tileRows)
	}
	if workers <= 1 {
		mulRows(0, m, n, k, a, *panels, c)
		return
	}
	// Split on tile boundaries so that every worker's tiles are whole.
	tiles := (m + tileRows - 1) / tileRows
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := tiles*w/workers*tileRows, min(m, tiles*(w+1)/workers*tileRows)
		if lo >= hi {
			continue
		}
		wg.Go(func() { mulRows(lo, hi, n, k, a, *panels, c) })
	}
	wg.Wait()
}

// panelsLen is the length of B packed into panels of tileCols rows.
func panelsLen(n, k int) int { return (n + tileCols - 1) / tileCols * tileCols * k }

// pack copies B [n, k] into panels: panel q holds rows q*16..q*16+15 of B transposed,
// [k][16], with rows past n zero.
func pack(n, k int, b, panels []float32) {
	for q := 0; q*tileCols < n; q++ {
		panel := panels[q*tileCols*k : (q+1)*tileCols*k]
		cols := min(tileCols, n-q*tileCols)
		if cols < tileCols {
			clear(panel)
		}
		for j := range cols {
			row := b[(q*tileCols+j)*k : (q*tileCols+j+1)*k]
			for p, v := range row {
				panel[p*tileCols+j] = v
			}
		}
	}
}

// mulRows computes rows lo..hi of C from the packed panels.
func mulRows(lo, hi, n, k int, a, panels, c []float32) {
	var edge [tileRows * tileCols]float32
	var rowPad []float32
	for i := lo; i < hi; i += tileRows {
		rows := min(tileRows, hi-i)
		aTile, lda := a[i*k:], k
		if rows < tileRows {
			// Pad the last rows with zeros so that the kernel reads whole tiles.
			if rowPad == nil {
				rowPad = make([]float32, tileRows*k)
			}
			clear(rowPad)
			copy(rowPad, a[i*k:(i+rows)*k])
			aTile = rowPad
		}
		for q := 0; q*tileCols < n; q++ {
			panel := panels[q*tileCols*k:]
			cols := min(tileCols, n-q*tileCols)
			if rows == tileRows && cols == tileCols {
				kernel4x16(k, aTile, lda, panel, c[i*n+q*tileCols:], n)
				continue
			}
			kernel4x16(k, aTile, lda, panel, edge[:], tileCols)
			for r := range rows {
				copy(c[(i+r)*n+q*tileCols:(i+r)*n+q*tileCols+cols], edge[r*tileCols:r*tileCols+cols])
			}
		}
	}
}

var scratchPool sync.Pool

func getScratch(n int) *[]float32 {
	if p, ok := scratchPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

func putScratch(p *[]float32) { scratchPool.Put(p) }
