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
type Proxy struct {
	// DSN is the database's DSN with its host replaced by the proxy's.
	DSN string

	t      testing.TB
	addr   string
	target string

	// finish makes a client that goes away leave the server's side to end
	// as a client that hung up would: see NewFinishingProxy.
	finish bool

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool // true for a connection to the server
	wg    sync.WaitGroup
}

// finishWithin bounds how long a finishing proxy waits for the server to
// end a dead client's statement and hang up.
const finishWithin = 2 * time.Minute

// NewProxy starts a proxy in front of d's server on a free loopback port;
// it is closed when the test ends.
func (d *DB) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	return d.newProxy(t, false)
}

// NewFinishingProxy starts a proxy in front of d's server behind which a
// client may die at any instant. A client killed with data unread in its
// socket makes its kernel reset the connection, and chDB's build of the
// current release aborts on a reset (clickhouse-notes: it does not on a
// plain hang-up). This proxy turns the reset into a hang-up: when the
// client goes, it ends the server's side for writing only, reads (and
// drops) what the server still sends until the server, its statement
// ended, closes, and only then closes the connection, with nothing unread.
// What the server sees is what any server sees of a client that sent its
// last statement and hung up; a killed readsync is still a killed
// readsync to everything else. Down waits for those ends too.
func (d *DB) NewFinishingProxy(t testing.TB) *Proxy {
	t.Helper()
	return d.newProxy(t, true)
}

func (d *DB) newProxy(t testing.TB, finish bool) *Proxy {
	t.Helper()
	u, err := url.Parse(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, addr: ln.Addr().String(), target: u.Host, finish: finish, conns: make(map[net.Conn]bool)}
	u.Host = p.addr
	p.DSN = u.String()
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

// Down refuses new connections and breaks the open ones, as a server that
// went away would. It waits until every forwarding goroutine has ended. A
// finishing proxy breaks its clients' connections and lets the server's
// end as it would for a client that died.
func (p *Proxy) Down() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c, toServer := range p.conns {
		if !p.finish || !toServer {
			c.Close()
		}
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
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = false, true
	p.wg.Add(2)
	p.mu.Unlock()
	forget := func(cs ...net.Conn) {
		p.mu.Lock()
		for _, c := range cs {
			delete(p.conns, c)
		}
		p.mu.Unlock()
	}
	if p.finish {
		go p.finishing(client, server, forget)
		return
	}
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		// Either side ending, or Down closing them, ends both directions.
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		forget(src, dst)
	}
	go pipe(server, client)
	go pipe(client, server)
}

// finishing forwards one connection for a finishing proxy: the client's
// bytes to the server until the client goes, then a hang-up; the server's
// bytes to the client while it is there, then to nowhere, until the server
// closes.
func (p *Proxy) finishing(client, server net.Conn, forget func(...net.Conn)) {
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(server, client)
		client.Close()
		// Whatever ended the client's side, the server is told no more
		// comes, and given time to end what it runs.
		_ = server.(*net.TCPConn).CloseWrite()
		_ = server.SetReadDeadline(time.Now().Add(finishWithin))
	}()
	defer p.wg.Done()
	_, err := io.Copy(client, server)
	if err != nil {
		// The client is gone: read the server's answer to the end.
		_, _ = io.Copy(io.Discard, server)
	}
	client.Close()
	server.Close()
	forget(client, server)
}
