package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Envelope fragments, in the upstream key order: code, data, msg, success.
const (
	failureBody   = `{"code":0,"data":{},"msg":"Process failed","success":false}`
	successPrefix = `{"code":1,"data":`
	successSuffix = `,"msg":"Process success","success":true}`
	listPrefix    = successPrefix + `{"list":`
	listSuffix    = `}` + successSuffix
)

// recordWriter appends JSON records to buf. It writes literals itself and
// uses an encoder only for strings and Extra values, which keeps encoding a
// large list cheap while leaving escaping to encoding/json.
type recordWriter struct {
	buf   *bytes.Buffer
	enc   *json.Encoder
	extra map[string]any
	used  map[string]bool
	first bool
	err   error
}

func newRecordWriter(buf *bytes.Buffer) *recordWriter {
	enc := json.NewEncoder(buf)
	// The upstream serves '&', '<' and '>' literally.
	enc.SetEscapeHTML(false)
	return &recordWriter{buf: buf, enc: enc}
}

// value encodes v with the encoder, dropping the newline Encode appends.
func (w *recordWriter) value(v any) {
	if w.err != nil {
		return
	}
	if err := w.enc.Encode(v); err != nil {
		w.err = fmt.Errorf("encode %T: %w", v, err)
		return
	}
	w.buf.Truncate(w.buf.Len() - 1)
}

func (w *recordWriter) str(s string) { w.value(s) }

func (w *recordWriter) begin(extra map[string]any) {
	w.buf.WriteByte('{')
	w.extra, w.first = extra, true
	clear(w.used)
}

// key writes the key of a documented field. It reports whether the caller
// should write the documented value; when Extra overrides the field, key
// writes Extra's value instead and returns false.
func (w *recordWriter) key(k string) bool {
	if !w.first {
		w.buf.WriteByte(',')
	}
	w.first = false
	w.buf.WriteByte('"')
	w.buf.WriteString(k) // documented keys need no escaping
	w.buf.WriteString(`":`)
	v, ok := w.extra[k]
	if !ok {
		return true
	}
	if w.used == nil {
		w.used = make(map[string]bool)
	}
	w.used[k] = true
	w.value(v)
	return false
}

func (w *recordWriter) int(k string, v int64) {
	if w.key(k) {
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), v, 10))
	}
}

func (w *recordWriter) string(k, v string) {
	if w.key(k) {
		w.str(v)
	}
}

func (w *recordWriter) bool(k string, v bool) {
	if w.key(k) {
		w.buf.Write(strconv.AppendBool(w.buf.AvailableBuffer(), v))
	}
}

// end writes the Extra keys that did not override a documented field, in
// sorted order so that output is deterministic, and closes the object.
func (w *recordWriter) end() {
	if len(w.extra) > len(w.used) {
		for _, k := range slices.Sorted(maps.Keys(w.extra)) {
			if w.used[k] {
				continue
			}
			if !w.first {
				w.buf.WriteByte(',')
			}
			w.first = false
			w.str(k)
			w.buf.WriteByte(':')
			w.value(w.extra[k])
		}
	}
	w.buf.WriteByte('}')
}

// project writes p as a project record.
func (w *recordWriter) project(p *Project) error {
	w.begin(p.Extra)
	w.int("id", p.ID)
	w.string("create_at", p.CreateAt)
	w.string("name", p.Name)
	w.string("description", p.Description)
	w.string("logo", p.Logo)
	w.int("type", p.Type)
	w.string("wallet_address", p.WalletAddress)
	w.string("nft", p.NFT)
	w.end()
	return w.err
}

// message writes m as a sent-message record with the given read count and
// percent, which differ from m's own when read growth is applied.
func (w *recordWriter) message(m *Message, read int64, percent string) error {
	w.begin(m.Extra)
	w.int("id", m.ID)
	if w.key("read_data") {
		w.buf.WriteString(`{"percent":`)
		w.str(percent)
		w.buf.WriteString(`,"read_count":`)
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), read, 10))
		w.buf.WriteString(`,"total":`)
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), m.Total, 10))
		w.buf.WriteByte('}')
	}
	w.string("create_at", m.CreateAt)
	w.string("sender", m.Sender)
	w.string("recv_group", m.RecvGroup)
	if w.key("receivers") {
		w.buf.WriteByte('[')
		for i, r := range m.Receivers {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			w.str(r)
		}
		w.buf.WriteByte(']')
	}
	w.string("subject", m.Subject)
	w.int("type", m.Type)
	w.bool("is_all_subscribers", m.IsAllSubscribers)
	w.end()
	return w.err
}
