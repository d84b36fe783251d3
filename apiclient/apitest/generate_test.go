package apitest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestPercentOf(t *testing.T) {
	const maxInt = 1<<63 - 1
	tests := []struct {
		read, total int64
		want        string
	}{
		{0, 0, "0.00%"},
		{5, 0, "0.00%"},
		{5, -1, "0.00%"},
		{0, 7, "0.00%"},
		{1, 8, "12.50%"},
		{1, 3, "33.33%"},
		{2, 3, "66.67%"},
		{12345, 100000, "12.35%"}, // half up, where float64 formatting gives 12.34
		{1, 20000, "0.01%"},       // exactly 0.005 rounds up
		{1, 20001, "0.00%"},
		{5, 5, "100.00%"},
		{15, 10, "150.00%"},
		{-1, 3, "-33.33%"},
		{1, maxInt, "0.00%"},
		{maxInt, maxInt, "100.00%"},
		{maxInt / 2, maxInt, "50.00%"},
	}
	for _, tt := range tests {
		if got := PercentOf(tt.read, tt.total); got != tt.want {
			t.Errorf("PercentOf(%d, %d) = %q, want %q", tt.read, tt.total, got, tt.want)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, b := Generate(5, 20, 42), Generate(5, 20, 42)
	if !reflect.DeepEqual(a, b) {
		t.Error("same arguments gave different data")
	}
	if reflect.DeepEqual(a, Generate(5, 20, 43)) {
		t.Error("different seeds gave the same data")
	}
	if longer := Generate(6, 20, 42); !reflect.DeepEqual(a, longer[:5]) {
		t.Error("Generate(n) is not a prefix of Generate(n+1)")
	}
	if got := Generate(-1, 5, 1); len(got) != 0 {
		t.Errorf("negative names gave %d projects", len(got))
	}
	if got := Generate(2, -1, 1); len(got) != 2 || len(got[0].Messages) != 0 {
		t.Errorf("negative messages gave %+v", got)
	}
}

func TestGenerateShape(t *testing.T) {
	const names, perName = 30, 40
	ps := Generate(names, perName, 7)
	if len(ps) != names {
		t.Fatalf("%d projects, want %d", len(ps), names)
	}
	msgIDs := make(map[int64]bool)
	zeroTotals := 0
	for i, p := range ps {
		if want := fmt.Sprintf("proj-%05d.dmail", i); p.NFT != want {
			t.Errorf("project %d NFT %q, want %q", i, p.NFT, want)
		}
		if p.ID != GeneratedProjectIDBase+int64(i) {
			t.Errorf("project %d ID %d", i, p.ID)
		}
		if _, err := time.Parse(createAtLayout, p.CreateAt); err != nil {
			t.Errorf("project %d create_at: %v", i, err)
		}
		if len(p.WalletAddress) != 42 || !strings.HasPrefix(p.WalletAddress, "0x") {
			t.Errorf("project %d wallet %q", i, p.WalletAddress)
		}
		if len(p.Messages) != perName {
			t.Fatalf("project %d has %d messages", i, len(p.Messages))
		}
		for _, m := range p.Messages {
			if msgIDs[m.ID] || m.ID < GeneratedMessageIDBase {
				t.Errorf("message id %d duplicated or below base", m.ID)
			}
			msgIDs[m.ID] = true
			if m.Sender != p.NFT {
				t.Errorf("message %d sender %q", m.ID, m.Sender)
			}
			if m.ReadCount < 0 || m.ReadCount > m.Total {
				t.Errorf("message %d read %d of %d", m.ID, m.ReadCount, m.Total)
			}
			if m.Percent != PercentOf(m.ReadCount, m.Total) {
				t.Errorf("message %d percent %q", m.ID, m.Percent)
			}
			if m.IsAllSubscribers != (len(m.Receivers) == 0) {
				t.Errorf("message %d all=%v receivers=%v", m.ID, m.IsAllSubscribers, m.Receivers)
			}
			if _, err := time.Parse(createAtLayout, m.CreateAt); err != nil || m.CreateAt < p.CreateAt {
				t.Errorf("message %d create_at %q (project %q): %v", m.ID, m.CreateAt, p.CreateAt, err)
			}
			if m.Total == 0 {
				zeroTotals++
			}
		}
	}
	if zeroTotals == 0 {
		t.Error("no message with a total of zero")
	}
}

func TestSampleProjects(t *testing.T) {
	ps := SampleProjects()
	var unicodeName, oddName, zeroTotal, bigID bool
	nfts, ids := make(map[string]bool), make(map[int64]bool)
	for _, p := range ps {
		if nfts[p.NFT] || ids[p.ID] {
			t.Errorf("duplicate project %q %d", p.NFT, p.ID)
		}
		nfts[p.NFT], ids[p.ID] = true, true
		unicodeName = unicodeName || utf8.RuneCountInString(p.NFT) != len(p.NFT)
		oddName = oddName || strings.ContainsAny(p.NFT, " ") && strings.Contains(p.NFT, "&")
		bigID = bigID || p.ID > 1<<53
		for _, m := range p.Messages {
			zeroTotal = zeroTotal || m.Total == 0 && m.Percent == "0.00%"
			if m.Sender != p.NFT || m.ReadCount > m.Total {
				t.Errorf("message %d of %q is inconsistent: %+v", m.ID, p.NFT, m)
			}
		}
	}
	if !unicodeName || !oddName || !zeroTotal || !bigID {
		t.Errorf("unicode=%v space&amp=%v zero total=%v big id=%v", unicodeName, oddName, zeroTotal, bigID)
	}

	ps[0].Messages[0].Subject = "changed"
	if SampleProjects()[0].Messages[0].Subject == "changed" {
		t.Error("SampleProjects returned shared data")
	}

	s := startServer(t, WithProjects(SampleProjects()...))
	for _, p := range SampleProjects() {
		if _, body := get(t, s, detailURL(s, p.NFT)); !strings.Contains(body, `"success":true`) {
			t.Errorf("%q not found: %s", p.NFT, body)
		}
		if got := listMessages(t, s, p.ID); len(got) != len(p.Messages) {
			t.Errorf("%q: %d messages, want %d", p.NFT, len(got), len(p.Messages))
		}
	}
}
