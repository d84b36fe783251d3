// Command fakeupstream serves a fake of the upstream messaging and project
// lookup API (package apitest) as a standalone process, for demos and
// benchmarks.
//
// Usage:
//
//	fakeupstream [-addr 127.0.0.1:0] [-sample] [-names N -messages M -seed S]
//	             [-latency 20ms] [-growth STEP] [-client-id ID -client-secret SECRET]
//	             [-url-file PATH] [-print-nft-names]
//
// Without -names it serves apitest.SampleProjects; with -names N it serves
// apitest.Generate(N, M, S), plus the sample projects if -sample is given
// explicitly. Once listening it prints "fakeupstream listening on <URL>" to
// standard error and, with -url-file, writes the base URL to PATH. It runs
// until interrupted (SIGINT or SIGTERM).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed command-line flags.
type options struct {
	addr          string
	sample        bool
	sampleSet     bool
	names         int
	messages      int
	seed          int64
	latency       time.Duration
	growth        int64
	clientID      string
	clientSecret  string
	urlFile       string
	printNFTNames bool
}

// run is the whole program; it returns the process exit code: 0 on success
// or a clean shutdown, 1 on a runtime failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fakeupstream: %v\n", err)
		return 2
	}

	projects := o.projects()
	if o.printNFTNames {
		for _, p := range projects {
			fmt.Fprintln(stdout, p.NFT)
		}
		return 0
	}

	if err := serve(ctx, o, projects, stderr); err != nil {
		fmt.Fprintf(stderr, "fakeupstream: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fakeupstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "`address` to listen on")
	fs.BoolVar(&o.sample, "sample", true, "serve the hand-written sample projects (default true without -names, false with it)")
	fs.IntVar(&o.names, "names", 0, "serve `N` generated projects")
	fs.IntVar(&o.messages, "messages", 10, "messages per generated project")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the generated data")
	fs.DurationVar(&o.latency, "latency", 0, "delay of every response")
	fs.Int64Var(&o.growth, "growth", 0, "raise read counts by up to `STEP` on every list request (0: off)")
	fs.StringVar(&o.clientID, "client-id", apitest.DefaultClientID, "accepted client_id header")
	fs.StringVar(&o.clientSecret, "client-secret", apitest.DefaultClientSecret, "accepted client_secret header")
	fs.StringVar(&o.urlFile, "url-file", "", "write the base URL to `PATH` once listening")
	fs.BoolVar(&o.printNFTNames, "print-nft-names", false, "print the served nft names, one per line, and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) { o.sampleSet = o.sampleSet || f.Name == "sample" })

	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.names < 0:
		return o, fmt.Errorf("-names must not be negative, got %d", o.names)
	case o.messages < 0:
		return o, fmt.Errorf("-messages must not be negative, got %d", o.messages)
	case o.latency < 0:
		return o, fmt.Errorf("-latency must not be negative, got %v", o.latency)
	case o.growth < 0:
		return o, fmt.Errorf("-growth must not be negative, got %d", o.growth)
	}
	return o, nil
}

// projects returns the data set the flags select.
func (o options) projects() []apitest.Project {
	var ps []apitest.Project
	if o.names == 0 && o.sample || o.names > 0 && o.sampleSet && o.sample {
		ps = apitest.SampleProjects()
	}
	return append(ps, apitest.Generate(o.names, o.messages, o.seed)...)
}

// serve runs the fake until ctx is done.
func serve(ctx context.Context, o options, projects []apitest.Project, stderr io.Writer) error {
	l, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := apitest.NewServer(
		apitest.WithListener(l),
		apitest.WithProjects(projects...),
		apitest.WithCredentials(o.clientID, o.clientSecret),
		apitest.WithLatency(o.latency),
		apitest.WithReadGrowth(o.growth),
		// Nobody reads the request log of a standalone process; keeping it
		// would grow without bound.
		apitest.WithRequestLimit(0),
	)
	defer srv.Close()

	fmt.Fprintf(stderr, "fakeupstream listening on %s\n", srv.URL)
	// The file comes last: a script that waits for it may rely on
	// everything above having happened.
	if o.urlFile != "" {
		if err := writeFileAtomic(o.urlFile, []byte(srv.URL)); err != nil {
			return fmt.Errorf("write url file: %w", err)
		}
	}
	<-ctx.Done()
	return nil
}

// writeFileAtomic writes data to a temporary file beside path and renames it
// into place, so a script polling for path never reads a partial URL.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
