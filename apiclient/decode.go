package apiclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// envelope is the outer object both operations return.
type envelope struct {
	Code    json.Number     `json:"code"`
	Data    json.RawMessage `json:"data"`
	Msg     string          `json:"msg"`
	Success bool            `json:"success"`
	hasCode bool
}

// check reports whether the envelope says success, the only state in which
// its data may be used.
func (e *envelope) check() error {
	if e.hasCode && e.Code == "1" && e.Success {
		return nil
	}
	return &EnvelopeError{Code: string(e.Code), Success: e.Success, Msg: e.Msg}
}

// decodeProject reads a whole details response. Project records are small,
// so the body is read at once; Raw keeps the data value byte for byte.
func decodeProject(r io.Reader) (Project, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return Project{}, fmt.Errorf("read body: %w", err)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Project{}, fmt.Errorf("%w: %w", errInvalidJSON, err)
	}
	env.hasCode = env.Code != ""
	if err := env.check(); err != nil {
		return Project{}, err
	}
	data := bytes.TrimSpace(env.Data)
	if len(data) == 0 || data[0] != '{' {
		return Project{}, errors.New("envelope data is not a project object")
	}
	var p Project
	if err := json.Unmarshal(data, &p); err != nil {
		return Project{}, fmt.Errorf("invalid project record: %w", err)
	}
	if p.ID == 0 {
		return Project{}, errors.New("project record has no id")
	}
	p.Raw = append(json.RawMessage(nil), data...)
	return p, nil
}

// decodeList walks a list response token by token so that only one message
// is held in memory at a time, whatever the list's length. Keys may come in
// any order; the envelope is checked once the object has been read.
func decodeList(r io.Reader, fn func(Message) error) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var env envelope
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		switch key {
		case "code":
			err = decodeField(dec, key, &env.Code)
			env.hasCode = true
		case "success":
			err = decodeField(dec, key, &env.Success)
		case "msg":
			err = decodeField(dec, key, &env.Msg)
		case "data":
			err = decodeListData(dec, fn)
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid JSON: data after the envelope")
	}
	return env.check()
}

// decodeListData reads the envelope's data value: null, or an object whose
// list is null or an array of messages.
func decodeListData(dec *json.Decoder, fn func(Message) error) error {
	tok, err := dec.Token()
	if err != nil {
		return invalidJSON(err)
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("envelope data is %v, not an object", describe(tok))
	}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		if key != "list" {
			if err := skipValue(dec); err != nil {
				return err
			}
			continue
		}
		if err := decodeMessages(dec, fn); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

func decodeMessages(dec *json.Decoder, fn func(Message) error) error {
	tok, err := dec.Token()
	if err != nil {
		return invalidJSON(err)
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("data.list is %v, not an array", describe(tok))
	}
	for i := 0; dec.More(); i++ {
		var m Message
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("data.list[%d]: %w", i, invalidJSON(err))
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", invalidJSON(err)
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%w: object key is %v", errInvalidJSON, describe(tok))
	}
	return key, nil
}

func decodeField(dec *json.Decoder, key string, v any) error {
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("envelope %s: %w", key, invalidJSON(err))
	}
	return nil
}

func skipValue(dec *json.Decoder) error {
	var skip json.RawMessage
	if err := dec.Decode(&skip); err != nil {
		return invalidJSON(err)
	}
	return nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return invalidJSON(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("%w: expected %q, found %v", errInvalidJSON, want, describe(tok))
	}
	return nil
}

// errInvalidJSON is in the chain of every error about a malformed body.
var errInvalidJSON = errors.New("invalid JSON")

// invalidJSON marks decoding failures; a body cut short reads as an
// unexpected end rather than a bare EOF.
func invalidJSON(err error) error {
	if errors.Is(err, ErrResponseTooLarge) {
		return err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", errInvalidJSON, err)
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return fmt.Sprintf("%q", t)
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("%T", t)
	}
}
