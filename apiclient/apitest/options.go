package apitest

import (
	"net"
	"time"
)

// Default credentials accepted by a Server unless WithCredentials is given.
const (
	DefaultClientID     = "1001"
	DefaultClientSecret = "fake-secret"
)

// Option configures a Server created by NewServer.
type Option func(*config)

type config struct {
	listener     net.Listener
	projects     []Project
	clientID     string
	clientSecret string
	latency      time.Duration
	growth       int64
	requestLimit int
	detailFaults map[string]Fault
	listFaults   map[int64]Fault
}

func defaultConfig() config {
	return config{
		clientID:     DefaultClientID,
		clientSecret: DefaultClientSecret,
		requestLimit: -1,
		detailFaults: make(map[string]Fault),
		listFaults:   make(map[int64]Fault),
	}
}

// WithProjects adds projects to the server's initial data, as if each were
// passed to Server.SetProject in order.
func WithProjects(ps ...Project) Option {
	return func(c *config) { c.projects = append(c.projects, ps...) }
}

// WithCredentials sets the client_id and client_secret header values the
// server accepts, replacing DefaultClientID and DefaultClientSecret.
func WithCredentials(clientID, clientSecret string) Option {
	return func(c *config) { c.clientID, c.clientSecret = clientID, clientSecret }
}

// WithLatency delays every response by d. If a request's context ends
// during the delay, the server drops the connection without a response.
func WithLatency(d time.Duration) Option {
	return func(c *config) { c.latency = d }
}

// WithFault registers f for details requests whose nft_name is nft.
func WithFault(nft string, f Fault) Option {
	return func(c *config) { c.detailFaults[nft] = f }
}

// WithListFault registers f for list requests whose project_id is
// projectID.
func WithListFault(projectID int64, f Fault) Option {
	return func(c *config) { c.listFaults[projectID] = f }
}

// WithReadGrowth turns on demo mode: every successful list request for a
// project first raises each message's read_count by a deterministic amount
// between 0 and step, capped at its total, and the response carries the
// raised counts with read_data.percent recomputed by PercentOf. The amounts
// depend only on the message id and on how many list requests the project
// has had, so the same sequence of requests yields the same data. Replacing
// a project with SetProject restarts its growth. A step of zero or less
// turns growth off, which is the default.
func WithReadGrowth(step int64) Option {
	return func(c *config) { c.growth = max(step, 0) }
}

// WithRequestLimit makes Server.Requests retain only the n most recent
// requests; n == 0 retains none. Server.RequestCount still counts every
// request. By default every request is retained, which suits tests but not
// a long-running process.
func WithRequestLimit(n int) Option {
	return func(c *config) { c.requestLimit = max(n, 0) }
}

// WithListener makes the server accept connections on l instead of on a
// new listener at 127.0.0.1:0. The Server takes ownership of l and closes it
// in Close. Server.URL is "http://" followed by l.Addr().
func WithListener(l net.Listener) Option {
	return func(c *config) { c.listener = l }
}
