package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/loadtest"
)

// runLoadtest is `vdpp loadtest`: concurrent clients against a loopback `vdpp serve`.
func runLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("loadtest", stdout, stderr)
	var o loadtest.Options
	var jsonPath string
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "server URL (loopback only)")
	fs.IntVar(&o.Clients, "clients", 8, "concurrent clients")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long clients submit new jobs")
	fs.DurationVar(&o.Drain, "drain", 2*time.Minute, "how long to wait for accepted jobs after --duration")
	fs.StringVar(&o.Params, "params", loadtest.DefaultParams, "JSON parameters of every job (the seed is set per job)")
	fs.StringVar(&o.Token, "api-token", os.Getenv("VDPP_API_TOKEN"), "bearer token (default $VDPP_API_TOKEN)")
	fs.BoolVar(&o.Verify, "verify", false, "re-compute every output in this process and compare bit for bit")
	fs.DurationVar(&o.KillEvery, "kill-every", 0, "kill one worker rank at this interval (0: never)")
	fs.StringVar(&o.KillPidFile, "kill-rank-pid-file", "", "kill workers by the pids in this file (the server's --worker-pid-file) instead of the admin endpoint")
	var modelName string
	fs.StringVar(&modelName, "model", "synthetic", "model the server runs (for --verify): synthetic, builtin or a checkpoint folder")
	fs.StringVar(&o.Model.Variant, "variant", "", "checkpoint weights variant (for --verify)")
	fs.StringVar(&o.Model.Backend, "backend", "", "GoMLX backend (for --verify)")
	fs.StringVar(&jsonPath, "json", "", "write the report as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	spec, err := serve.ResolveModelSpec(modelName)
	if err != nil {
		return err
	}
	spec.Variant, spec.Backend = o.Model.Variant, o.Model.Backend
	o.Model = spec
	o.Log = newLogger(stderr)
	rep, err := loadtest.Run(ctx, o)
	if err != nil {
		return err
	}
	if jsonPath != "" {
		if err := loadtest.WriteJSON(jsonPath, rep); err != nil {
			return err
		}
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintln(stdout, string(b))
	if rep.Lost > 0 || rep.Failed > 0 || (rep.OutputsMismatched != nil && *rep.OutputsMismatched > 0) {
		return fmt.Errorf("loadtest: %d lost, %d failed, %v mismatched", rep.Lost, rep.Failed, deref(rep.OutputsMismatched))
	}
	return nil
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
