// Package wanservetest holds tests of `vdpp serve` with a Wan folder (the built-in Wan, whose
// text encoder the server loads): jobs with different LoRAs of the server's --lora-dir share
// one loaded transformer, each applied per call over the shared weights, and each job's
// video is the bytes `vdpp generate --lora` gives for the same job.
package wanservetest
