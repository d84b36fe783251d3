package chconn

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// WithCAFile returns the DSN with TLS that trusts the CA certificates in
// the PEM file at path instead of the system's, for a server whose
// certificate a private CA signed. The DSN must ask for TLS (secure=true):
// a CA file on a plain-text DSN is a mistake that would send the password
// in the clear.
func (d DSN) WithCAFile(path string) (DSN, error) {
	if d.opts.TLS == nil {
		return DSN{}, errors.New("a CA file needs a DSN with secure=true (native TLS, port 9440 by default)")
	}
	pool, err := loadCAFile(path)
	if err != nil {
		return DSN{}, err
	}
	opts := *d.opts
	opts.TLS = d.opts.TLS.Clone()
	opts.TLS.RootCAs = pool
	d.opts = &opts
	return d, nil
}

// loadCAFile reads a PEM file of CA certificates into a pool.
func loadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}
