package apiclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/internal/permessage"
)

// BenchmarkDecodeList measures the streaming list decoder per message, on a
// body held in memory so that neither HTTP nor the fake's encoding is
// counted. 20 messages is the size of a project in the make bench workload,
// where the per-list cost (decoder, envelope) is spread over few messages;
// the large list shows the marginal cost of one more message.
func BenchmarkDecodeList(b *testing.B) {
	for _, n := range []int{20, 10_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			body := servedListBody(b, n)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			got := 0
			permessage.Loop(b, n, func() {
				err := decodeList(bytes.NewReader(body), func(Message) error {
					got++
					return nil
				})
				if err != nil {
					b.Fatalf("decode list of %d messages: %v", n, err)
				}
			})
			if got != b.N*n {
				b.Fatalf("decoded %d messages in %d loops, want %d each", got, b.N, n)
			}
		})
	}
}

// servedListBody returns the list response the fake upstream serves for one
// generated project with n messages, byte for byte. Taking it from the fake
// rather than writing JSON here keeps the benchmark on the same bytes as
// make bench and the integration tests.
func servedListBody(b *testing.B, n int) []byte {
	b.Helper()
	ps := apitest.Generate(1, n, 1)
	srv := apitest.NewServer(apitest.WithProjects(ps...))
	defer srv.Close()

	u := srv.URL + apitest.ListPath + "?" + url.Values{"project_id": {strconv.FormatInt(ps[0].ID, 10)}}.Encode()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		b.Fatalf("build list request: %v", err)
	}
	req.Header["client_id"] = []string{apitest.DefaultClientID}
	req.Header["client_secret"] = []string{apitest.DefaultClientSecret}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("GET list of %d messages from the fake: %v", n, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatalf("read list of %d messages from the fake: %v", n, err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET list of %d messages from the fake: status %s: %.200s", n, resp.Status, body)
	}
	return body
}
