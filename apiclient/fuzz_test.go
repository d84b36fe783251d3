package apiclient

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeList checks that no body makes the list decoder panic, and that
// a body it accepts yields messages only when the envelope says success.
func FuzzDecodeList(f *testing.F) {
	for _, seed := range []string{
		`{"code":1,"data":{"list":[{"id":1,"read_data":{"percent":"50.00%","read_count":1,"total":2}}]},"msg":"Process success","success":true}`,
		`{"data":{"list":null},"code":1,"success":true}`,
		`{"code":0,"data":{},"msg":"Process failed","success":false}`,
		`{"code":1,"data":{"list":[{"id":9223372036854775807,"receivers":["a","\u0000"]}]},"success":true}`,
		`{"code":1,"data":{"list":[{"id":1}`,
		`<html>502</html>`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		err := decodeList(strings.NewReader(body), func(Message) error { return nil })
		if err != nil {
			return
		}
		// A map matches keys exactly, as the decoder does (a struct would
		// fold case), and keeps the last of repeated keys, as the decoder does.
		var env map[string]json.RawMessage
		jerr := json.Unmarshal([]byte(body), &env)
		code := strings.Trim(string(env["code"]), `"`)
		if jerr != nil || code != "1" || string(env["success"]) != "true" {
			t.Fatalf("accepted a body that is not a success envelope (%v, code %s, success %s): %q", jerr, env["code"], env["success"], body)
		}
	})
}

// FuzzDecodeProject checks that no body makes the details decoder panic and
// that an accepted record always has an id and keeps its raw JSON.
func FuzzDecodeProject(f *testing.F) {
	f.Add(`{"code":1,"data":{"id":1,"nft":"a.eth","x":[1]},"msg":"Process success","success":true}`)
	f.Add(`{"code":0,"data":{},"msg":"Process failed","success":false}`)
	f.Add(`{"code":1,"data":{"id":1.0},"success":true}`)
	f.Fuzz(func(t *testing.T, body string) {
		p, err := decodeProject(strings.NewReader(body))
		if err != nil {
			return
		}
		if p.ID == 0 || len(p.Raw) == 0 {
			t.Fatalf("accepted record without id or raw: %+v", p)
		}
	})
}
