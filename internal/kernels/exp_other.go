//go:build !amd64

package kernels

var vecExp = false

func expSlice(dst, src []float32)                 { panic("unreachable") }
func sigmoidSlice(dst, src []float32)             { panic("unreachable") }
func siluSlice(dst, src []float32)                { panic("unreachable") }
func expSubSumVec(s []float32, m float32) float32 { panic("unreachable") }

func sum64Vec(s []float32) float64                                { panic("unreachable") }
func sqDev64Vec(s []float32, m float64) float64                   { panic("unreachable") }
func affineVec(dst, src []float32, mean, a, b float32, silu bool) { panic("unreachable") }

func addVec(dst, src []float32)  { panic("unreachable") }
func mulVec(dst, a, b []float32) { panic("unreachable") }

func addScalarVec(dst []float32, b float32) { panic("unreachable") }

func binaryVec(op BinaryOp, dst, a, b []float32, scalarB bool) { panic("unreachable") }
