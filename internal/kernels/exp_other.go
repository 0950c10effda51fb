//go:build !amd64

package kernels

const vecExp = false

func expSlice(dst, src []float32)                 { panic("unreachable") }
func sigmoidSlice(dst, src []float32)             { panic("unreachable") }
func siluSlice(dst, src []float32)                { panic("unreachable") }
func expSubSumVec(s []float32, m float32) float32 { panic("unreachable") }
