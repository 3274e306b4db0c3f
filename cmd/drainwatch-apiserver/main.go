// Command drainwatch-apiserver serves the drainwatch daemons' terminations
// and startups as the aggregated API drainwatch.io/v1alpha1 (the chart's
// apiServer Deployment and APIService): `kubectl get terminations -n shop`,
// authorized by the cluster's RBAC per namespace, and what
// `drainwatch timeline`, `advise` and `rollout` read with --via-api.
//
// It is a binary of its own, not a subcommand of drainwatch: a generic
// Kubernetes API server links code (etcd's client, admission, OpenAPI)
// whose package initialisation the node daemon would pay for on every node.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/apiserver"
)

const usage = `drainwatch-apiserver — the daemons' records as the Kubernetes API drainwatch.io/v1alpha1

Usage:
  drainwatch-apiserver [flags]

Registered by an APIService (the chart: apiServer.enabled), it answers
kubectl get terminations / startups: the API server authenticates the user
and passes the identity in its front-proxy headers; this server checks
RBAC on terminations or startups in the request's namespace, then asks the
daemons behind --daemons-service over TLS (--daemons-ca-file) with a token
bound to their audience (--daemons-token-file).

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	o := apiserver.NewOptions()
	fs := pflag.NewFlagSet("drainwatch-apiserver", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.Bool("version", false, "print the version and exit")
	o.AddFlags(fs)
	fs.Usage = func() { fmt.Fprint(stderr, usage, fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version {
		fmt.Fprintln(stderr, "drainwatch-apiserver", exporter.Version)
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "drainwatch-apiserver: unexpected arguments %q\n", fs.Args())
		return 2
	}
	srv, err := apiserver.New(o)
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch-apiserver:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "drainwatch-apiserver:", err)
		return 1
	}
	return 0
}
