package chconn

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// HTTPPortError says that an address of the DSN answered the native
// protocol's hello with an HTTP reply: the DSN names ClickHouse's HTTP port
// (8123 by default) where the native port is wanted. The driver would wait
// for its handshake until the dial timeout and then report only that.
type HTTPPortError struct {
	// Addr is the host and port as the DSN gives them.
	Addr string
	// StatusLine is the first line of the reply, such as
	// "HTTP/1.1 400 Bad Request".
	StatusLine string
}

func (e *HTTPPortError) Error() string {
	return fmt.Sprintf("%s answered the native protocol's hello with an HTTP reply (%q): that is ClickHouse's HTTP port; "+
		"use its native port (tcp_port, 9000 by default) in a clickhouse:// DSN", e.Addr, e.StatusLine)
}

// portProbeTimeout bounds the check of one address. Either kind of server
// answers a hello at once; an address that does not is left for the
// driver to report.
const portProbeTimeout = 2 * time.Second

// CheckNativePort sends a native hello to each address of a plain-text
// DSN and returns an *HTTPPortError when one answers with HTTP. An address
// that cannot be reached, or answers in any other way, passes: whether the
// server is up is for the connection to find out. A TLS DSN is not probed.
func (d DSN) CheckNativePort(ctx context.Context) error {
	if d.opts.TLS != nil {
		return nil
	}
	for _, addr := range d.opts.Addr {
		if err := probeNativePort(ctx, addr, d.opts.Auth); err != nil {
			return err
		}
	}
	return nil
}

func probeNativePort(ctx context.Context, addr string, auth clickhouse.Auth) error {
	ctx, cancel := context.WithTimeout(ctx, portProbeTimeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write(nativeHello(auth)); err != nil {
		return nil
	}
	line, _ := bufio.NewReader(io.LimitReader(conn, 512)).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.") {
		return nil
	}
	return &HTTPPortError{Addr: addr, StatusLine: strings.TrimSpace(line)}
}

// nativeHello is the client's first packet of the native protocol. A
// native server answers it with its own hello (or an exception, such as
// for a wrong password: the DSN's credentials are sent so that a check
// does not read as a failed login). The client name ends in an empty line
// so that an HTTP server, reading it as a request line and headers,
// answers at once (with 400 or 501) rather than waiting for more.
func nativeHello(auth clickhouse.Auth) []byte {
	str := func(b []byte, s string) []byte {
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	b := binary.AppendUvarint(nil, 0) // packet: client hello
	b = str(b, "readsync-port-check\r\n\r\n")
	b = binary.AppendUvarint(b, 1) // client version major
	b = binary.AppendUvarint(b, 0) // minor
	b = binary.AppendUvarint(b, clickhouse.ClientTCPProtocolVersion)
	b = str(b, "") // database: the server's default, which always exists
	b = str(b, auth.Username)
	return str(b, auth.Password)
}

// CheckAddrs reports an address of the DSN without a port (or with port
// 0). The driver would only find out by failing every connection, and a
// daemon would spool its rows until someone looked.
func (d DSN) CheckAddrs() error {
	for _, addr := range d.opts.Addr {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" || port == "0" {
			return fmt.Errorf("address %q has no port: want host and native port, such as clickhouse://user:password@host:9000/database", addr)
		}
	}
	return nil
}
