package chconn

import "strings"

// Redact removes the DSN's password from an error's text while keeping
// the chain for errors.Is and errors.As. Every error that may quote a
// statement or the driver passes through it before it leaves readsync's
// ClickHouse packages.
func (c *Conn) Redact(err error) error { return redactSecret(err, c.password) }

// redactSecret removes a secret from an error's text while keeping the
// chain for errors.Is and errors.As.
func redactSecret(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), secret, "xxxxx"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
