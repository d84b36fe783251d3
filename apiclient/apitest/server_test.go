package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func fixtureProject() Project {
	return Project{
		ID: 7, NFT: "a.dmail", Name: "A & <B>",
		Description: "line1\nline2 \"q\" \x00", Logo: "https://x.example/y.png",
		Type: 2, WalletAddress: "0xabc", CreateAt: "2023-01-02 03:04:05",
		Messages: []Message{
			{
				ID: 9007199254740993, Sender: "a.dmail", RecvGroup: "custom",
				Receivers: []string{"b.dmail", "c&d.dmail"}, Subject: "Hi & <you>", Type: 2,
				CreateAt: "2023-01-02 03:04:06", ReadCount: 1, Total: 8, Percent: "12.50%",
			},
			{
				ID: 2, Sender: "a.dmail", RecvGroup: "all_subscribers", Subject: "All",
				Type: 1, IsAllSubscribers: true, CreateAt: "2023-01-03 00:00:00",
				Total: 0, Percent: "0.00%",
			},
		},
	}
}

const (
	fixtureDetailBody = `{"code":1,"data":{"id":7,"create_at":"2023-01-02 03:04:05","name":"A & <B>",` +
		`"description":"line1\nline2 \"q\" \u0000","logo":"https://x.example/y.png","type":2,` +
		`"wallet_address":"0xabc","nft":"a.dmail"},"msg":"Process success","success":true}`
	fixtureListBody = `{"code":1,"data":{"list":[` +
		`{"id":9007199254740993,"read_data":{"percent":"12.50%","read_count":1,"total":8},` +
		`"create_at":"2023-01-02 03:04:06","sender":"a.dmail","recv_group":"custom",` +
		`"receivers":["b.dmail","c&d.dmail"],"subject":"Hi & <you>","type":2,"is_all_subscribers":false},` +
		`{"id":2,"read_data":{"percent":"0.00%","read_count":0,"total":0},` +
		`"create_at":"2023-01-03 00:00:00","sender":"a.dmail","recv_group":"all_subscribers",` +
		`"receivers":[],"subject":"All","type":1,"is_all_subscribers":true}` +
		`]},"msg":"Process success","success":true}`
)

// objectKeys returns the keys of the top-level JSON object in body, in
// order.
func objectKeys(t *testing.T, body string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("body does not start an object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("value of %v: %v", tok, err)
		}
	}
	return keys
}

func TestEnvelope(t *testing.T) {
	s := startServer(t, WithProjects(fixtureProject()))
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"detail", detailURL(s, "a.dmail"), fixtureDetailBody},
		{"list", listURL(s, 7), fixtureListBody},
		{"detail failure", detailURL(s, "nobody.dmail"), failureBody},
		{"list failure", listURL(s, 8), failureBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := get(t, s, tt.url)
			if res.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", res.StatusCode)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if body != tt.want {
				t.Errorf("body =\n%s\nwant\n%s", body, tt.want)
			}
			if got := objectKeys(t, body); !slices.Equal(got, []string{"code", "data", "msg", "success"}) {
				t.Errorf("keys = %v", got)
			}
		})
	}
}

func TestStringsRoundTrip(t *testing.T) {
	p := fixtureProject()
	s := startServer(t, WithProjects(p))
	_, body := get(t, s, detailURL(s, p.NFT))
	var env struct {
		Data struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatal(err)
	}
	if env.Data.Name != p.Name || env.Data.Description != p.Description {
		t.Errorf("decoded name %q description %q, want %q %q", env.Data.Name, env.Data.Description, p.Name, p.Description)
	}
}

func TestBigIDs(t *testing.T) {
	const big = 9007199254740993 // 2^53+1: float64 would turn it into ...992
	p := Project{ID: big, NFT: "big.dmail", Messages: []Message{{ID: big + 2, Total: 1}}}
	s := startServer(t, WithProjects(p))

	_, body := get(t, s, detailURL(s, "big.dmail"))
	if !strings.Contains(body, `"id":9007199254740993,`) {
		t.Errorf("detail body lacks exact id: %s", body)
	}
	_, body = get(t, s, listURL(s, big))
	if !strings.Contains(body, `"id":9007199254740995,`) {
		t.Errorf("list body lacks exact message id: %s", body)
	}
	_, body = get(t, s, listURL(s, big-1))
	if body != failureBody {
		t.Errorf("neighbouring id found a project: %s", body)
	}
}

func TestNamesNeedingEscapes(t *testing.T) {
	names := []string{
		"a&b.dmail", "a+b.dmail", "a=b.dmail", "100%.dmail", "%41.dmail", "with space.dmail",
		"café-☕.eth", "東京.dmail", "emoji 🚀 & more=+%20.dmail", "q?x#y/z.dmail",
	}
	var ps []Project
	for i, n := range names {
		ps = append(ps, Project{ID: int64(i + 1), NFT: n})
	}
	s := startServer(t, WithProjects(ps...))
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			for _, enc := range []struct {
				name string
				raw  string
			}{
				{"QueryEscape", url.QueryEscape(n)},
				{"every byte escaped", escapeAll(n)},
			} {
				_, body := get(t, s, s.URL+DetailPath+"?nft_name="+enc.raw)
				want := fmt.Sprintf(`"nft":%q}`, n)
				if !json.Valid([]byte(body)) || !strings.Contains(body, want) {
					t.Errorf("%s: body %s does not contain %s", enc.name, body, want)
				}
			}
		})
	}
	t.Run("unescaped plus means space", func(t *testing.T) {
		_, body := get(t, s, s.URL+DetailPath+"?nft_name=a+b.dmail")
		if body != failureBody {
			t.Errorf("a+b.dmail sent raw should look up %q and fail, got %s", "a b.dmail", body)
		}
	})
}

// escapeAll percent-encodes every byte of s outside the unreserved set,
// including spaces as %20, which is a valid encoding different from
// url.QueryEscape.
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func TestCredentials(t *testing.T) {
	s := startServer(t, WithProjects(fixtureProject()), WithCredentials("42", "s3cret"))
	good := func() http.Header {
		h := http.Header{}
		h.Set("client_id", "42")
		h.Set("client_secret", "s3cret")
		h.Set("Content-Type", "application/json")
		return h
	}
	tests := []struct {
		name   string
		modify func(http.Header)
		want   int
	}{
		{"correct", func(http.Header) {}, http.StatusOK},
		{"lower-case keys on the wire", func(h http.Header) {
			h.Del("client_id")
			h["client_id"] = []string{"42"}
		}, http.StatusOK},
		{"missing id", func(h http.Header) { h.Del("client_id") }, http.StatusUnauthorized},
		{"missing secret", func(h http.Header) { h.Del("client_secret") }, http.StatusUnauthorized},
		{"wrong id", func(h http.Header) { h.Set("client_id", "43") }, http.StatusUnauthorized},
		{"wrong secret", func(h http.Header) { h.Set("client_secret", "s3cre") }, http.StatusUnauthorized},
		{"default credentials", func(h http.Header) {
			h.Set("client_id", DefaultClientID)
			h.Set("client_secret", DefaultClientSecret)
		}, http.StatusUnauthorized},
		{"duplicate id", func(h http.Header) { h.Add("client_id", "42") }, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		for _, u := range []string{detailURL(s, "a.dmail"), listURL(s, 7)} {
			t.Run(tt.name+" "+u[len(s.URL):], func(t *testing.T) {
				h := good()
				tt.modify(h)
				res, body, err := do(t, t.Context(), newClient(t), http.MethodGet, u, h)
				if err != nil {
					t.Fatal(err)
				}
				if res.StatusCode != tt.want {
					t.Errorf("status = %d, want %d", res.StatusCode, tt.want)
				}
				if tt.want != http.StatusOK && string(body) != failureBody {
					t.Errorf("body = %s, want failure envelope", body)
				}
			})
		}
	}
}

func TestListContentType(t *testing.T) {
	s := startServer(t, WithProjects(fixtureProject()))
	tests := []struct {
		contentType string
		want        int
	}{
		{"application/json", http.StatusOK},
		{"application/json; charset=utf-8", http.StatusOK},
		{"Application/JSON", http.StatusOK},
		{"", http.StatusBadRequest},
		{"text/plain", http.StatusBadRequest},
		{"application/jsonx", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			h := authed(detailURL(s, "x")) // credentials only
			if tt.contentType != "" {
				h.Set("Content-Type", tt.contentType)
			}
			res, body, err := do(t, t.Context(), newClient(t), http.MethodGet, listURL(s, 7), h)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.want {
				t.Errorf("status = %d, want %d", res.StatusCode, tt.want)
			}
			if tt.want == http.StatusBadRequest && string(body) != failureBody {
				t.Errorf("body = %s, want failure envelope", body)
			}
		})
	}
	t.Run("not required on details", func(t *testing.T) {
		res, body := get(t, s, detailURL(s, "a.dmail"))
		if res.StatusCode != http.StatusOK || body != fixtureDetailBody {
			t.Errorf("status %d body %s", res.StatusCode, body)
		}
	})
}

func TestRejections(t *testing.T) {
	s := startServer(t, WithProjects(fixtureProject()))
	tests := []struct {
		name      string
		method    string
		target    string
		want      int
		wantAllow bool
	}{
		{"unknown nft", http.MethodGet, DetailPath + "?nft_name=b.dmail", http.StatusOK, false},
		{"nft case differs", http.MethodGet, DetailPath + "?nft_name=A.dmail", http.StatusOK, false},
		{"missing nft_name", http.MethodGet, DetailPath, http.StatusOK, false},
		{"empty nft_name", http.MethodGet, DetailPath + "?nft_name=", http.StatusOK, false},
		{"unknown project_id", http.MethodGet, ListPath + "?project_id=8", http.StatusOK, false},
		{"missing project_id", http.MethodGet, ListPath, http.StatusOK, false},
		{"non-integer project_id", http.MethodGet, ListPath + "?project_id=7x", http.StatusOK, false},
		{"fractional project_id", http.MethodGet, ListPath + "?project_id=7.0", http.StatusOK, false},
		{"overflowing project_id", http.MethodGet, ListPath + "?project_id=9223372036854775808", http.StatusOK, false},
		{"POST details", http.MethodPost, DetailPath + "?nft_name=a.dmail", http.StatusMethodNotAllowed, true},
		{"PUT list", http.MethodPut, ListPath + "?project_id=7", http.StatusMethodNotAllowed, true},
		{"unknown path", http.MethodGet, "/platform/api/v1/messages/lists?project_id=7", http.StatusNotFound, false},
		{"trailing slash", http.MethodGet, ListPath + "/?project_id=7", http.StatusNotFound, false},
		{"root", http.MethodGet, "/", http.StatusNotFound, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := s.URL + tt.target
			res, body, err := do(t, t.Context(), newClient(t), tt.method, u, authed(u))
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.want {
				t.Errorf("status = %d, want %d", res.StatusCode, tt.want)
			}
			if string(body) != failureBody {
				t.Errorf("body = %s, want failure envelope", body)
			}
			if got := res.Header.Get("Allow"); (got == http.MethodGet) != tt.wantAllow {
				t.Errorf("Allow = %q", got)
			}
		})
	}
}

func TestRawList(t *testing.T) {
	tests := []string{`null`, `[]`, `[{"id":"1","read_data":null,"receivers":"x"}]`, `[{"id":1,}`}
	for i, raw := range tests {
		t.Run(raw, func(t *testing.T) {
			p := Project{ID: int64(i + 1), NFT: "raw.dmail", RawList: json.RawMessage(raw),
				Messages: []Message{{ID: 99}}}
			s := startServer(t, WithProjects(p))
			_, body := get(t, s, listURL(s, p.ID))
			want := `{"code":1,"data":{"list":` + raw + `},"msg":"Process success","success":true}`
			if body != want {
				t.Errorf("body = %s, want %s", body, want)
			}
		})
	}
}

func TestExtraFields(t *testing.T) {
	p := Project{
		ID: 3, NFT: "x.dmail", Name: "X",
		Extra: map[string]any{"zeta": 1, "alpha": "a&b", "name": nil, "raw": json.RawMessage(`{"k":[1,2]}`)},
		Messages: []Message{{
			ID: 5, Total: 2, ReadCount: 1, Percent: "50.00%",
			Extra: map[string]any{"status": 3, "receivers": nil, "id": "5"},
		}},
	}
	s := startServer(t, WithProjects(p))

	_, body := get(t, s, detailURL(s, "x.dmail"))
	wantDetail := `{"code":1,"data":{"id":3,"create_at":"","name":null,"description":"","logo":"",` +
		`"type":0,"wallet_address":"","nft":"x.dmail","alpha":"a&b","raw":{"k":[1,2]},"zeta":1},` +
		`"msg":"Process success","success":true}`
	if body != wantDetail {
		t.Errorf("detail body =\n%s\nwant\n%s", body, wantDetail)
	}

	_, body = get(t, s, listURL(s, 3))
	wantList := `{"code":1,"data":{"list":[{"id":"5","read_data":{"percent":"50.00%","read_count":1,"total":2},` +
		`"create_at":"","sender":"","recv_group":"","receivers":null,"subject":"","type":0,` +
		`"is_all_subscribers":false,"status":3}]},"msg":"Process success","success":true}`
	if body != wantList {
		t.Errorf("list body =\n%s\nwant\n%s", body, wantList)
	}
}

func TestSetProjectRejectsUnencodableExtra(t *testing.T) {
	s := startServer(t)
	defer func() {
		if recover() == nil {
			t.Error("SetProject accepted a channel in Extra")
		}
	}()
	s.SetProject(Project{ID: 1, NFT: "bad.dmail", Extra: map[string]any{"c": make(chan int)}})
}

func TestRequestsRecorded(t *testing.T) {
	s := startServer(t, WithProjects(fixtureProject()))
	get(t, s, detailURL(s, "a.dmail"))
	get(t, s, listURL(s, 7))
	get(t, s, s.URL+"/nowhere?x=1")

	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("recorded %d requests, want 3", len(reqs))
	}
	first := reqs[0]
	if first.Method != http.MethodGet || first.Path != DetailPath ||
		first.Query.Get("nft_name") != "a.dmail" || first.RawQuery != "nft_name=a.dmail" {
		t.Errorf("first request = %+v", first)
	}
	if first.Header.Get("client_id") != DefaultClientID || first.Header.Get("client_secret") != DefaultClientSecret {
		t.Errorf("credentials not recorded: %v", first.Header)
	}
	if first.Time.IsZero() || reqs[1].Time.Before(first.Time) {
		t.Errorf("times not recorded in order: %v %v", first.Time, reqs[1].Time)
	}
	if reqs[1].Header.Get("Content-Type") != "application/json" || reqs[1].Query.Get("project_id") != "7" {
		t.Errorf("list request = %+v", reqs[1])
	}
	if reqs[2].Path != "/nowhere" {
		t.Errorf("rejected request not recorded: %+v", reqs[2])
	}

	reqs[0].Header.Set("client_id", "tampered")
	reqs[0].Query.Set("nft_name", "tampered")
	if again := s.Requests()[0]; again.Header.Get("client_id") != DefaultClientID || again.Query.Get("nft_name") != "a.dmail" {
		t.Error("Requests returned shared maps")
	}

	for path, want := range map[string]int{DetailPath: 1, ListPath: 1, "/nowhere": 1, "/else": 0} {
		if got := s.RequestCount(path); got != want {
			t.Errorf("RequestCount(%q) = %d, want %d", path, got, want)
		}
	}
	s.ResetRequests()
	if len(s.Requests()) != 0 || s.RequestCount(DetailPath) != 0 {
		t.Error("ResetRequests kept history")
	}
}

func TestRequestLimit(t *testing.T) {
	for _, limit := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s := startServer(t, WithRequestLimit(limit))
			for i := range 10 {
				get(t, s, detailURL(s, fmt.Sprint(i)))
			}
			reqs := s.Requests()
			if len(reqs) != limit {
				t.Fatalf("retained %d, want %d", len(reqs), limit)
			}
			for i, r := range reqs {
				if want := fmt.Sprint(10 - limit + i); r.Query.Get("nft_name") != want {
					t.Errorf("request %d is %q, want %q", i, r.Query.Get("nft_name"), want)
				}
			}
			if got := s.RequestCount(DetailPath); got != 10 {
				t.Errorf("RequestCount = %d, want 10", got)
			}
		})
	}
}

func TestSetProject(t *testing.T) {
	s := startServer(t, WithProjects(Project{ID: 1, NFT: "one.dmail", Name: "v1"}, Project{ID: 2, NFT: "two.dmail"}))

	p := Project{ID: 1, NFT: "one.dmail", Name: "v2", Messages: []Message{{ID: 10, ReadCount: 1, Total: 4}}}
	s.SetProject(p)
	p.Messages[0].ReadCount = 3 // the server holds its own copy
	if _, body := get(t, s, detailURL(s, "one.dmail")); !strings.Contains(body, `"name":"v2"`) {
		t.Errorf("details not replaced: %s", body)
	}
	if _, body := get(t, s, listURL(s, 1)); !strings.Contains(body, `"read_count":1,`) {
		t.Errorf("list not replaced or not copied: %s", body)
	}

	// Taking over project two's id removes project two entirely.
	s.SetProject(Project{ID: 2, NFT: "one.dmail"})
	for _, u := range []string{detailURL(s, "two.dmail"), listURL(s, 1)} {
		if _, body := get(t, s, u); body != failureBody {
			t.Errorf("%s still served: %s", u, body)
		}
	}
	if _, body := get(t, s, listURL(s, 2)); body != `{"code":1,"data":{"list":[]},"msg":"Process success","success":true}` {
		t.Errorf("new project not served: %s", body)
	}

	s.RemoveProject("one.dmail")
	if _, body := get(t, s, listURL(s, 2)); body != failureBody {
		t.Errorf("removed project served: %s", body)
	}
}

func TestLatency(t *testing.T) {
	const d = 100 * time.Millisecond
	s := startServer(t, WithProjects(fixtureProject()), WithLatency(d))

	start := time.Now()
	res, body := get(t, s, detailURL(s, "a.dmail"))
	if elapsed := time.Since(start); elapsed < d {
		t.Errorf("answered after %v, want at least %v", elapsed, d)
	}
	if res.StatusCode != http.StatusOK || body != fixtureDetailBody {
		t.Errorf("status %d body %s", res.StatusCode, body)
	}

	ctx, cancel := context.WithTimeout(t.Context(), d/4)
	defer cancel()
	_, _, err := do(t, ctx, newClient(t), http.MethodGet, detailURL(s, "a.dmail"), authed(""))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
}

func TestCloseAbandonsSlowRequests(t *testing.T) {
	s := NewServer(WithProjects(fixtureProject()), WithFault("a.dmail", Slow(time.Hour)))
	t.Cleanup(s.Close)
	client := newClient(t)
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, detailURL(s, "a.dmail"), nil)
		req.Header = authed("")
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	for s.RequestCount(DetailPath) == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	s.Close()
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Close took %v", elapsed)
	}
	if err := <-errc; err == nil {
		t.Error("request in flight at Close succeeded")
	}
}

func TestLargeListStreams(t *testing.T) {
	const n = 20000
	ps := Generate(1, n, 1)
	s := startServer(t, WithProjects(ps...))
	res, body := get(t, s, listURL(s, ps[0].ID))
	if res.ContentLength != -1 {
		t.Errorf("ContentLength = %d, want a streamed (chunked) body", res.ContentLength)
	}
	var env struct {
		Data struct {
			List []struct {
				ID int64 `json:"id"`
			} `json:"list"`
		} `json:"data"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		t.Fatal(err)
	}
	if len(env.Data.List) != n {
		t.Fatalf("got %d messages, want %d", len(env.Data.List), n)
	}
	for i, m := range env.Data.List {
		if m.ID != ps[0].Messages[i].ID {
			t.Fatalf("message %d id %d, want %d", i, m.ID, ps[0].Messages[i].ID)
		}
	}
	if bytes.Count([]byte(body), []byte("\n")) != 0 {
		t.Error("body contains newlines between elements")
	}
}

func TestWithListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(WithListener(l), WithProjects(fixtureProject()))
	t.Cleanup(s.Close)
	if want := "http://" + l.Addr().String(); s.URL != want {
		t.Errorf("URL = %q, want %q", s.URL, want)
	}
	if _, body := get(t, s, detailURL(s, "a.dmail")); body != fixtureDetailBody {
		t.Errorf("body = %s", body)
	}
	s.Close()
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
		t.Error("listener still accepting after Close")
	}
}
