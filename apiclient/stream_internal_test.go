package apiclient

import (
	"fmt"
	"io"
	"testing"
)

// lazyList produces a list response of n messages as it is read, never
// holding it whole, and notes how far it has been read.
type lazyList struct {
	t        *testing.T
	n, next  int
	pending  []byte
	produced int
	eof      bool
	tail     bool
	// ends[i] is the offset just past message i+1.
	ends []int
}

const listHead = `{"code":1,"msg":"Process success","data":{"list":[`

func (l *lazyList) Read(p []byte) (int, error) {
	if l.eof {
		l.t.Error("read again after EOF")
		return 0, io.EOF
	}
	for len(l.pending) == 0 {
		switch {
		case l.produced == 0 && l.next == 0 && !l.tail:
			l.pending = []byte(listHead)
		case l.next < l.n:
			sep := ","
			if l.next == 0 {
				sep = ""
			}
			l.pending = fmt.Appendf(nil, `%s{"id":%d,"project_id":7,"subject":"message %d","create_at":"2026-01-01 00:00:00","read_data":{"read_count":%d,"total":100,"percent":"%d.00%%"}}`,
				sep, l.next+1, l.next+1, l.next%100, l.next%100)
			l.next++
			l.ends = append(l.ends, l.produced+len(l.pending))
		case !l.tail:
			l.pending = []byte(`]},"success":true}`)
			l.tail = true
		default:
			l.eof = true
			return 0, io.EOF
		}
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	l.produced += n
	return n, nil
}

// The list decoder reads a large body once, front to back, and hands each
// message on long before the body ends: it never reads far ahead of the
// message it is decoding.
func TestDecodeListStreams(t *testing.T) {
	const n = 200_000
	const window = 256 << 10 // how far ahead of a message the decoder may have read
	body := &lazyList{t: t, n: n}
	seen := 0
	err := decodeList(body, func(m Message) error {
		seen++
		if m.ID != int64(seen) {
			t.Fatalf("message %d has id %d", seen, m.ID)
		}
		if ahead := body.produced - body.ends[seen-1]; ahead > window {
			t.Fatalf("at message %d the decoder had read %d bytes ahead", seen, ahead)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != n {
		t.Fatalf("%d messages decoded, want %d", seen, n)
	}
	if body.produced < 16<<20 {
		t.Fatalf("body was only %d bytes; the test needs one far larger than the window", body.produced)
	}
}
