package chconn

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Host is one host of a cluster, as the server's system.clusters lists it.
type Host struct {
	Shard, Replica uint32
	// Address is the host's native-protocol address, host:port.
	Address string
	// Version is the server's version when Hosts reached it.
	Version string
	// Err is why Hosts could not reach it.
	Err error
}

// ClusterHosts lists the hosts of the configured cluster. A cluster the
// server does not know is an error that names the ones it knows.
func (c *Conn) ClusterHosts(ctx context.Context) ([]Host, error) {
	rows, err := c.conn.Query(ctx, "SELECT shard_num, replica_num, host_name, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num",
		c.names.topo.Cluster)
	if err != nil {
		return nil, c.Redact(fmt.Errorf("read system.clusters: %w", err))
	}
	defer rows.Close()
	var hosts []Host
	for rows.Next() {
		var (
			h    Host
			name string
			port uint16
		)
		if err := rows.Scan(&h.Shard, &h.Replica, &name, &port); err != nil {
			return nil, c.Redact(fmt.Errorf("read system.clusters: %w", err))
		}
		h.Address = net.JoinHostPort(name, strconv.Itoa(int(port)))
		hosts = append(hosts, h)
	}
	if err := rows.Err(); err != nil {
		return nil, c.Redact(fmt.Errorf("read system.clusters: %w", err))
	}
	if len(hosts) == 0 {
		known, err := QueryColumn[string](ctx, c.conn, "SELECT DISTINCT cluster FROM system.clusters ORDER BY cluster")
		if err != nil {
			return nil, c.Redact(fmt.Errorf("read system.clusters: %w", err))
		}
		return nil, fmt.Errorf("cluster %q is not in the server's remote_servers (it has: %s)", c.names.topo.Cluster, strings.Join(known, ", "))
	}
	return hosts, nil
}

// Hosts reaches every host of the cluster, with the DSN's credentials and
// settings, and reports each one's version or why it did not answer. The
// error is for the list itself: an unknown cluster, or the server not
// answering.
func (c *Conn) Hosts(ctx context.Context) ([]Host, error) {
	hosts, err := c.ClusterHosts(ctx)
	if err != nil {
		return nil, err
	}
	for i := range hosts {
		hosts[i].Version, hosts[i].Err = c.reach(ctx, hosts[i].Address)
	}
	return hosts, nil
}

// OpenHost connects to one host with the DSN's credentials and settings,
// for statements ON CLUSTER cannot run. The caller closes the connection.
func (c *Conn) OpenHost(addr string) (driver.Conn, error) {
	opts := c.opts
	opts.Addr = []string{addr}
	conn, err := clickhouse.Open(&opts)
	return conn, c.Redact(err)
}

func (c *Conn) reach(ctx context.Context, addr string) (string, error) {
	conn, err := c.OpenHost(addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		return "", c.Redact(err)
	}
	v, err := conn.ServerVersion()
	if err != nil {
		return "", c.Redact(err)
	}
	return fmt.Sprintf("%d.%d.%d", v.Version.Major, v.Version.Minor, v.Version.Patch), nil
}
