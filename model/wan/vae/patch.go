package vae

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// patchify is diffusers' patchify: [B, C, F, H, W] -> [B, C·p², F, H/p, W/p], channel
// c·p² + pw·p + ph taking pixel (h·p + ph, w·p + pw). p = 1 is the identity.
func patchify(x *Node, p int) *Node {
	if p == 1 {
		return x
	}
	d := x.Shape().Dimensions
	y := Reshape(x, d[0], d[1], d[2], d[3]/p, p, d[4]/p, p)
	y = TransposeAllAxes(y, 0, 1, 6, 4, 2, 3, 5)
	return Reshape(y, d[0], d[1]*p*p, d[2], d[3]/p, d[4]/p)
}

// unpatchify is diffusers' unpatchify, the inverse of patchify.
func unpatchify(x *Node, p int) *Node {
	if p == 1 {
		return x
	}
	d := x.Shape().Dimensions
	c := d[1] / (p * p)
	y := Reshape(x, d[0], c, p, p, d[2], d[3], d[4])
	y = TransposeAllAxes(y, 0, 1, 4, 5, 3, 6, 2)
	return Reshape(y, d[0], c, d[2], d[3]*p, d[4]*p)
}
