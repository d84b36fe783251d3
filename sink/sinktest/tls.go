package sinktest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TLSServer is a private ClickHouse server, started for one test, that
// speaks the native protocol over TLS only. Its certificate, for 127.0.0.1
// and localhost, is signed by a CA the test generated, which no system
// trusts.
type TLSServer struct {
	// DSN is the server's native TLS DSN (secure=true), naming the database
	// "readsync". It trusts only the system's CAs: pass CAFile as well.
	DSN string
	// CAFile is a PEM file holding the certificate of the CA that signed
	// the server's.
	CAFile string
	// Conn is a TLS connection that trusts the CA, for reading rows back;
	// it is closed for you.
	Conn driver.Conn
}

// NewTLSServer generates a CA and a server certificate, starts
// clickhouse-server with them from a config in t.TempDir() on free ports,
// waits until it answers over TLS, and registers its stop with t.Cleanup.
// It skips the test when no clickhouse-server is installed, and fails it
// instead when READSYNC_REQUIRE_TLS_SERVER=1 (make test-all, which
// installs it; make test needs only the current release, which has no
// clickhouse-server binary).
func NewTLSServer(t testing.TB) *TLSServer {
	t.Helper()
	bin := serverBinary()
	if bin == "" {
		if os.Getenv("READSYNC_REQUIRE_TLS_SERVER") == "1" {
			t.Fatal("no clickhouse-server installed (nor READSYNC_CLICKHOUSE_SERVER_BIN set); scripts/clickhouse.sh ensure installs it")
		}
		t.Skip("no clickhouse-server installed; scripts/clickhouse.sh ensure installs it")
	}
	dir := t.TempDir()
	caPEM, certPEM, keyPEM, err := generateCertificates()
	if err != nil {
		t.Fatalf("generate certificates: %v", err)
	}
	s := &TLSServer{CAFile: filepath.Join(dir, "ca.pem")}
	for name, data := range map[string][]byte{"ca.pem": caPEM, "server.crt": certPEM, "server.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)

	// A free port may be taken again before the server binds it: try anew.
	const attempts = 3
	for i := 1; ; i++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		err = s.start(t, bin, dir, port, pool)
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) || i == attempts {
			t.Fatal(err)
		}
	}
}

var errPortTaken = errors.New("port already in use")

// start runs the server on port and waits until it answers over TLS.
func (s *TLSServer) start(t testing.TB, bin, dir string, port int, pool *x509.CertPool) error {
	t.Helper()
	if err := writeTLSConfig(dir, port); err != nil {
		return err
	}
	logFile := filepath.Join(dir, "log", "clickhouse-server.err.log")
	out, err := os.Create(filepath.Join(dir, "server.out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(bin, "--config-file="+filepath.Join(dir, "config.xml"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		TLS:         &tls.Config{RootCAs: pool},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		stop()
		return fmt.Errorf("open a TLS connection to %s: %w", addr, err)
	}
	if err := waitForTLS(conn, exited); err != nil {
		conn.Close()
		stop()
		tail := logTail(filepath.Join(dir, "server.out"), logFile)
		if strings.Contains(tail, "Address already in use") {
			return errPortTaken
		}
		return fmt.Errorf("clickhouse-server with TLS on %s: %w\n%s", addr, err, tail)
	}
	// Cleanups run last first: the connection closes before the server stops.
	t.Cleanup(stop)
	t.Cleanup(func() { conn.Close() })
	s.Conn = conn
	s.DSN = "clickhouse://default:@" + addr + "/readsync?secure=true"
	return nil
}

// waitForTLS pings until the server answers, it exits, or a minute passes.
func waitForTLS(conn driver.Conn, exited <-chan struct{}) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := conn.Ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within a minute: %w", err)
		}
		select {
		case <-exited:
			return errors.New("the server exited during startup")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serverBinary finds clickhouse-server, as scripts/clickhouse.sh does.
func serverBinary() string {
	if bin := os.Getenv("READSYNC_CLICKHOUSE_SERVER_BIN"); bin != "" {
		return bin
	}
	if bin, err := exec.LookPath("clickhouse-server"); err == nil {
		return bin
	}
	for _, bin := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
	return ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeTLSConfig writes a server config with only a TLS native port. 18.16
// opens only the ports its config names, and needs no DH parameters file
// (it then uses OpenSSL's built-in groups). poll_interval: an idle
// connection notices shutdown within a second rather than ten.
func writeTLSConfig(dir string, port int) error {
	for _, sub := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	config := `<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>` + dir + `/log/clickhouse-server.log</log>
        <errorlog>` + dir + `/log/clickhouse-server.err.log</errorlog>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port_secure>` + strconv.Itoa(port) + `</tcp_port_secure>
    <openSSL>
        <server>
            <certificateFile>` + dir + `/server.crt</certificateFile>
            <privateKeyFile>` + dir + `/server.key</privateKeyFile>
            <verificationMode>none</verificationMode>
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <cacheSessions>true</cacheSessions>
            <disableProtocols>sslv2,sslv3</disableProtocols>
            <preferServerCiphers>true</preferServerCiphers>
        </server>
    </openSSL>
    <max_concurrent_queries>20</max_concurrent_queries>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>67108864</uncompressed_cache_size>
    <path>` + dir + `/data/</path>
    <tmp_path>` + dir + `/tmp/</tmp_path>
    <user_files_path>` + dir + `/user_files/</user_files_path>
    <format_schema_path>` + dir + `/format_schemas/</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
</yandex>
`
	users := `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <poll_interval>1</poll_interval>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default/></quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o644)
}

// generateCertificates returns, PEM-encoded, a CA certificate and a server
// certificate and key for 127.0.0.1 and localhost signed by that CA.
func generateCertificates() (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "readsync test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		nil
}

// logTail returns the last lines of each non-empty file, to explain a
// failed start.
func logTail(files ...string) string {
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		fmt.Fprintf(&b, "last lines of %s:\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}
