package sync_test

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sync"
)

func TestZZProf(t *testing.T) {
	url := os.Getenv("PROF_URL")
	dsn, _ := sink.ParseDSN(os.Getenv("PROF_DSN"))
	ch, err := sink.OpenClickHouse(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	api, _ := apiclient.New(apiclient.Config{BaseURL: url, ClientID: "1001", ClientSecret: "fake-secret", HTTPClient: apiclient.NewHTTPClient(16)})
	s := sync.New(sync.Config{Source: api, Sink: ch, Concurrency: 16, BatchRows: 50000})
	stop := make(chan struct{})
	go func() {
		var max uint64
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > max+4<<20 {
				max = ms.HeapInuse
				f, _ := os.Create("/tmp/heap.prof")
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
				t.Logf("heap inuse %d MB", max>>20)
			}
		}
	}()
	runtime.MemProfileRate = 4096
	rep, err := s.Run(context.Background(), sync.Pass{Names: []string{os.Getenv("PROF_NAME")}})
	close(stop)
	t.Log(rep.Rows, err)
}
