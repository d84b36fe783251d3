package app

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"
)

// newLogger returns the process logger: tint's coloured text on a terminal,
// JSON otherwise, unless format says which.
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	tty := isTerminal(w)
	if format == "" {
		format = "json"
		if tty {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(tint.NewTextHandler(w, &tint.Options{
			Level:      level,
			TimeFormat: time.DateTime,
			NoColor:    !tty,
		}))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// isTerminal reports whether w is a terminal, where a person reads.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
