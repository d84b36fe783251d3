package apiclient

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func collect(body string) ([]Message, error) {
	var got []Message
	err := decodeList(strings.NewReader(body), func(m Message) error {
		got = append(got, m)
		return nil
	})
	return got, err
}

func TestDecodeList(t *testing.T) {
	const ok = `"code":1,"msg":"Process success","success":true`
	tests := []struct {
		name    string
		body    string
		wantIDs []int64
		wantErr string
	}{
		{"two messages", `{` + ok + `,"data":{"list":[{"id":1},{"id":2}]}}`, []int64{1, 2}, ""},
		{"envelope after data", `{"data":{"list":[{"id":7}]},` + ok + `}`, []int64{7}, ""},
		{"null list", `{` + ok + `,"data":{"list":null}}`, nil, ""},
		{"empty list", `{` + ok + `,"data":{"list":[]}}`, nil, ""},
		{"null data", `{` + ok + `,"data":null}`, nil, ""},
		{"unknown fields everywhere", `{` + ok + `,"trace":{"a":[1,{"b":2}]},"data":{"page":3,"list":[{"id":5,"new":{"x":1}}]}}`, []int64{5}, ""},
		{"big ids stay exact", `{` + ok + `,"data":{"list":[{"id":9007199254740993},{"id":9223372036854775807}]}}`, []int64{9007199254740993, 9223372036854775807}, ""},
		{"failure envelope", `{"code":0,"data":{},"msg":"Process failed","success":false}`, nil, `upstream reported failure (code 0, success false, msg "Process failed")`},
		{"code 1 but success false", `{"code":1,"data":{"list":[]},"msg":"?","success":false}`, nil, "upstream reported failure (code 1, success false"},
		{"success but code 2", `{"code":2,"data":{"list":[]},"msg":"?","success":true}`, nil, "upstream reported failure (code 2, success true"},
		{"no code", `{"data":{"list":[]},"msg":"?","success":true}`, nil, "code missing"},
		{"truncated", `{` + ok + `,"data":{"list":[{"id":1},{"id"`, nil, "invalid JSON: unexpected EOF"},
		{"html", `<html><body>Bad Gateway</body></html>`, nil, "invalid JSON"},
		{"empty body", ``, nil, "invalid JSON: unexpected EOF"},
		{"list is object", `{` + ok + `,"data":{"list":{"id":1}}}`, nil, "data.list is \"{\", not an array"},
		{"data is string", `{` + ok + `,"data":"x"}`, nil, "envelope data is a string, not an object"},
		{"id not integer", `{` + ok + `,"data":{"list":[{"id":1.5}]}}`, nil, "data.list[0]: invalid JSON"},
		{"id beyond int64", `{` + ok + `,"data":{"list":[{"id":9223372036854775808}]}}`, nil, "data.list[0]: invalid JSON"},
		{"trailing data", `{` + ok + `,"data":{"list":[]}} {}`, nil, "data after the envelope"},
		{"top level array", `[1]`, nil, "invalid JSON: expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := collect(tt.body)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.wantIDs) {
				t.Fatalf("got %d messages, want %d", len(got), len(tt.wantIDs))
			}
			for i, m := range got {
				if m.ID != tt.wantIDs[i] {
					t.Errorf("message %d id %d, want %d", i, m.ID, tt.wantIDs[i])
				}
			}
		})
	}
}

func TestDecodeListFields(t *testing.T) {
	body := `{"code":1,"msg":"Process success","success":true,"data":{"list":[
	 {"id":1,"read_data":{"percent":"50.00%","read_count":1,"total":2},"create_at":"2026-01-02 03:04:05",
	  "sender":"café-☕.eth","recv_group":"g\u0000","receivers":["a\"b","c\nd"],"subject":"hi & <bye>","type":2,"is_all_subscribers":true},
	 {"id":2,"read_data":{"percent":12.5,"read_count":0,"total":0}},
	 {"id":3,"read_data":{"percent":null,"read_count":0,"total":0}},
	 {"id":4,"read_data":null}]}}`
	got, err := collect(body)
	if err != nil {
		t.Fatal(err)
	}
	m := got[0]
	if m.ReadData.Percent != "50.00%" || m.ReadData.ReadCount != 1 || m.ReadData.Total != 2 || m.CreateAt != "2026-01-02 03:04:05" ||
		m.Sender != "café-☕.eth" || m.RecvGroup != "g\x00" || len(m.Receivers) != 2 || m.Receivers[0] != `a"b` || m.Receivers[1] != "c\nd" ||
		m.Subject != "hi & <bye>" || m.Type != 2 || !m.IsAllSubscribers {
		t.Errorf("message decoded as %+v", m)
	}
	if got[1].ReadData.Percent != "12.5" {
		t.Errorf("numeric percent decoded as %q, want the number's text", got[1].ReadData.Percent)
	}
	if got[2].ReadData.Percent != "" {
		t.Errorf("null percent decoded as %q", got[2].ReadData.Percent)
	}
	if got[3].ReadData != nil {
		t.Errorf("null read_data decoded as %+v", got[3].ReadData)
	}
}

func TestDecodeListCallbackError(t *testing.T) {
	stop := errors.New("stop")
	err := decodeList(strings.NewReader(`{"code":1,"success":true,"data":{"list":[{"id":1}]}}`), func(Message) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("error %v, want the callback's", err)
	}
}

func TestDecodeProject(t *testing.T) {
	const record = `{"id":9007199254740993,"create_at":"2026-01-02 03:04:05","name":"Café ☕","description":"a\nb","logo":"https://x/y.png","type":1,"wallet_address":"0xabc","nft":"café-☕.eth","extra":{"tier":"gold"},"z":[1]}`
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"ok", `{"code":1,"data":` + record + `,"msg":"Process success","success":true}`, ""},
		{"failure", `{"code":0,"data":{},"msg":"Process failed","success":false}`, "upstream reported failure"},
		{"success with empty data", `{"code":1,"data":{},"msg":"Process success","success":true}`, "project record has no id"},
		{"data is list", `{"code":1,"data":[],"msg":"Process success","success":true}`, "not a project object"},
		{"bad json", `{"code":1,"data":`, "invalid JSON"},
		{"id is float", `{"code":1,"data":{"id":1.5},"success":true}`, "invalid project record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := decodeProject(strings.NewReader(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != 9007199254740993 || p.NFT != "café-☕.eth" || p.Name != "Café ☕" || p.WalletAddress != "0xabc" || p.Type != 1 {
				t.Errorf("project decoded as %+v", p)
			}
			if string(p.Raw) != record {
				t.Errorf("raw record changed:\n got %s\nwant %s", p.Raw, record)
			}
		})
	}
}

func TestLimitedReader(t *testing.T) {
	for _, tt := range []struct {
		size, limit int64
		tooLarge    bool
	}{{10, 10, false}, {11, 10, true}, {0, 10, false}, {1 << 20, 1000, true}} {
		r := &limitedReader{r: strings.NewReader(strings.Repeat("x", int(tt.size))), left: tt.limit, limit: tt.limit}
		n, err := io.Copy(io.Discard, r)
		if got := errors.Is(err, ErrResponseTooLarge); got != tt.tooLarge {
			t.Errorf("size %d limit %d: err %v", tt.size, tt.limit, err)
		}
		if n > tt.limit {
			t.Errorf("size %d limit %d: read %d bytes", tt.size, tt.limit, n)
		}
	}
}
