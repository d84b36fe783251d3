package apitest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

type listedMessage struct {
	ID       int64 `json:"id"`
	ReadData struct {
		Percent   string `json:"percent"`
		ReadCount int64  `json:"read_count"`
		Total     int64  `json:"total"`
	} `json:"read_data"`
}

func listMessages(t *testing.T, s *Server, id int64) []listedMessage {
	t.Helper()
	_, body := get(t, s, listURL(s, id))
	var env struct {
		Data struct {
			List []listedMessage `json:"list"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return env.Data.List
}

func growthProject() Project {
	p := Generate(1, 50, 3)[0]
	// Edge cases: nothing to grow, already full, over-full garbage, garbage
	// percent that growth must replace.
	p.Messages[0].Total, p.Messages[0].ReadCount = 0, 0
	p.Messages[1].ReadCount = p.Messages[1].Total
	p.Messages[2].ReadCount = p.Messages[2].Total + 5
	p.Messages[3].Percent = "n/a"
	return p
}

func TestReadGrowth(t *testing.T) {
	const step, passes = 7, 40
	p := growthProject()
	s := startServer(t, WithProjects(p), WithReadGrowth(step))

	prev := make([]int64, len(p.Messages))
	for i, m := range p.Messages {
		prev[i] = m.ReadCount
	}
	grew := false
	for pass := range passes {
		got := listMessages(t, s, p.ID)
		if len(got) != len(p.Messages) {
			t.Fatalf("pass %d: %d messages, want %d", pass, len(got), len(p.Messages))
		}
		for i, m := range got {
			want := p.Messages[i]
			rd := m.ReadData
			switch {
			case rd.Total != want.Total:
				t.Fatalf("pass %d message %d: total %d, want %d", pass, i, rd.Total, want.Total)
			case rd.ReadCount < prev[i]:
				t.Fatalf("pass %d message %d: read_count fell from %d to %d", pass, i, prev[i], rd.ReadCount)
			case rd.ReadCount-prev[i] > step:
				t.Fatalf("pass %d message %d: grew by %d, more than %d", pass, i, rd.ReadCount-prev[i], step)
			case rd.ReadCount > rd.Total && rd.ReadCount != want.ReadCount:
				t.Fatalf("pass %d message %d: read_count %d exceeds total %d", pass, i, rd.ReadCount, rd.Total)
			case rd.Percent != PercentOf(rd.ReadCount, rd.Total):
				t.Fatalf("pass %d message %d: percent %q for %d/%d", pass, i, rd.Percent, rd.ReadCount, rd.Total)
			}
			grew = grew || rd.ReadCount > prev[i]
			prev[i] = rd.ReadCount
		}
	}
	if !grew {
		t.Error("no message grew")
	}
	if prev[2] != p.Messages[2].ReadCount {
		t.Errorf("over-full message changed to %d", prev[2])
	}
	full := 0
	for i := range prev {
		if prev[i] == p.Messages[i].Total {
			full++
		}
	}
	if full < 3 {
		t.Errorf("only %d messages reached their total after %d passes", full, passes)
	}
}

func TestReadGrowthDeterministic(t *testing.T) {
	p := growthProject()
	run := func(concurrent bool) string {
		s := startServer(t, WithProjects(p), WithReadGrowth(5))
		if concurrent {
			var wg sync.WaitGroup
			for range 9 {
				wg.Go(func() { get(t, s, listURL(s, p.ID)) })
			}
			wg.Wait()
		} else {
			for range 9 {
				get(t, s, listURL(s, p.ID))
			}
		}
		_, body := get(t, s, listURL(s, p.ID))
		return body
	}
	sequential := run(false)
	if again := run(false); again != sequential {
		t.Error("two servers served different data after the same requests")
	}
	if concurrent := run(true); concurrent != sequential {
		t.Error("concurrent requests led to different data")
	}
}

func TestReadGrowthRestartsOnSetProject(t *testing.T) {
	p := growthProject()
	s := startServer(t, WithProjects(p), WithReadGrowth(1000))
	first := listMessages(t, s, p.ID)
	listMessages(t, s, p.ID)
	s.SetProject(p)
	if again := listMessages(t, s, p.ID); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Error("growth did not restart after SetProject")
	}
}

func TestReadGrowthOff(t *testing.T) {
	for _, step := range []int64{0, -3} {
		p := growthProject()
		s := startServer(t, WithProjects(p), WithReadGrowth(step))
		for range 3 {
			for i, m := range listMessages(t, s, p.ID) {
				if m.ReadData.ReadCount != p.Messages[i].ReadCount || m.ReadData.Percent != p.Messages[i].Percent {
					t.Fatalf("step %d: message %d changed to %+v", step, i, m.ReadData)
				}
			}
		}
	}
}

func TestGrownRead(t *testing.T) {
	const maxInt = 1<<63 - 1
	tests := []struct{ read, total, inc, want int64 }{
		{0, 10, 3, 3},
		{8, 10, 3, 10},
		{10, 10, 3, 10},
		{12, 10, 3, 12},
		{0, 0, 3, 0},
		{-1 << 63, maxInt, maxInt, -1},
		{maxInt - 1, maxInt, maxInt, maxInt},
	}
	for _, tt := range tests {
		if got := grownRead(tt.read, tt.total, tt.inc); got != tt.want {
			t.Errorf("grownRead(%d, %d, %d) = %d, want %d", tt.read, tt.total, tt.inc, got, tt.want)
		}
	}
}
