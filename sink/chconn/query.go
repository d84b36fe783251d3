package chconn

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Querier sends statements: a Conn, or a driver's connection to one host
// of a cluster.
type Querier interface {
	Exec(ctx context.Context, query string, args ...any) error
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) driver.Row
}

// QueryColumn returns the one column of a query's rows.
func QueryColumn[T any](ctx context.Context, conn Querier, q string, args ...any) ([]T, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// QueryMap runs q, which selects a key and a value, and returns the values
// by key.
func QueryMap[K comparable, V any](ctx context.Context, conn Querier, q string, args ...any) (map[K]V, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[K]V{}
	for rows.Next() {
		var (
			k K
			v V
		)
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// QueryEach runs q and calls each for every row.
func QueryEach(ctx context.Context, conn Querier, q string, each func(driver.Rows) error) error {
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
