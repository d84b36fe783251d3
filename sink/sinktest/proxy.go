package sinktest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to the test ClickHouse and can be cut and
// restored, to stage an outage while the server itself keeps running for
// the other tests.
//
// A client may also die behind it at any instant. A client killed with the
// server's answer unread in its socket makes its kernel reset the
// connection, and chDB's build of the current release aborts the whole
// server on a reset, though not on a plain hang-up. So the proxy never
// passes a reset on: whenever a client's side ends (the client died or
// hung up, or Down cut it), the proxy ends the server's side for writing
// only, reads and drops what the server still sends until the server,
// its statement done, closes, and only then closes, with nothing unread.
// The server sees what any server sees of a client that hung up after its
// last statement; to the client, a cut is a cut.
type Proxy struct {
	// DSN is the database's DSN with its host replaced by the proxy's.
	DSN string

	t      testing.TB
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool // the clients' connections, which Down cuts
	wg    sync.WaitGroup
}

// finishWithin bounds how long the proxy waits for the server to end the
// statement of a client that went away, and hang up.
const finishWithin = 2 * time.Minute

// NewProxy starts a proxy in front of d's server on a free loopback port;
// it is closed when the test ends.
func (d *DB) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	u, err := url.Parse(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, addr: ln.Addr().String(), target: u.Host, conns: make(map[net.Conn]bool)}
	u.Host = p.addr
	p.DSN = u.String()
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

// Down refuses new connections and breaks the clients' open ones, as a
// server that went away would. It waits until the server has ended every
// connection and every forwarding goroutine has returned.
func (p *Proxy) Down() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Up listens again on the same address.
func (p *Proxy) Up() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serveLocked(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
}

func (p *Proxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		client.Close()
		server.Close() // nothing sent, nothing to read: a plain hang-up
		return
	}
	p.conns[client] = true
	p.wg.Add(2)
	p.mu.Unlock()

	// The client's bytes to the server until the client's side ends; then
	// the server is told that nothing more comes.
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(server, client)
		client.Close()
		_ = server.(*net.TCPConn).CloseWrite()
		_ = server.SetReadDeadline(time.Now().Add(finishWithin))
	}()
	// The server's bytes to the client while it is there, then to nowhere,
	// until the server closes.
	go func() {
		defer p.wg.Done()
		if _, err := io.Copy(client, server); err != nil {
			_, _ = io.Copy(io.Discard, server)
		}
		client.Close()
		server.Close()
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
	}()
}
