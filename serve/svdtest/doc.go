// Package svdtest holds the tests of `vdpp serve` with a Stable Video Diffusion folder: the
// server's serve.FamilyGenerator (conditioning and decoding through the SVD family's
// family.Sampler) and its workers (the UNet, through the same family) give a job exactly
// the bits of one sample of `vdpp generate` with the same parameters, and parameters the
// checkpoint cannot serve are refused with job.ErrBadParams (HTTP 400).
package svdtest
