package sync

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadSchedulesGood(t *testing.T) {
	got, err := LoadSchedules("testdata/schedules/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d schedules, want 3", len(got))
	}
	// Repeats inside a schedule are dropped; names are kept byte for byte.
	if want := []string{"alice.dmail", "café-☕.eth"}; !slices.Equal(got[0].NFTNames, want) {
		t.Errorf("hourly names = %q, want %q", got[0].NFTNames, want)
	}
	if got[1].NFTNames[0] != "a&b=c+d%e f.eth" {
		t.Errorf("URL-unsafe name changed: %q", got[1].NFTNames[0])
	}
	for _, s := range got {
		if s.Spec == nil {
			t.Errorf("schedule %q has no parsed spec", s.Name)
		}
	}
	// A name listed by several schedules is fetched once.
	want := []string{"alice.dmail", "café-☕.eth", "a&b=c+d%e f.eth", "bob.dmail"}
	if names := Names(got); !slices.Equal(names, want) {
		t.Errorf("Names = %q, want %q", names, want)
	}
}

func TestLoadSchedulesErrors(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"unknown-key.yaml", `schedule "hourly" (schedules[0]): unknown key "crn" (known: name, cron, nft_names, nft_names_file, nft_names_query)`},
		{"unknown-top-key.yaml", `invalid YAML: [1:1] unknown field "schedule"`},
		{"empty-names.yaml", `schedule "hourly" (schedules[0]): nft_names is missing or empty`},
		{"missing-names.yaml", `schedule "hourly" (schedules[0]): nft_names is missing or empty`},
		{"file-not-string.yaml", `schedule "hourly" (schedules[0]): nft_names_file must be a string, found [a b] (quote it)`},
		{"empty-query.yaml", `schedule "hourly" (schedules[0]): nft_names_query is empty`},
		{"names-not-list.yaml", `schedule "hourly" (schedules[0]): nft_names must be a list, found alice.dmail`},
		{"blank-name-item.yaml", `schedule "hourly" (schedules[0]): nft_names[1] is empty`},
		{"number-name-item.yaml", `schedule "hourly" (schedules[0]): nft_names[1] must be a string, found 12345 (quote it)`},
		{"duplicate-schedule.yaml", `schedule "hourly" (schedules[1]): name already used by schedules[0]`},
		{"bad-cron.yaml", `schedule "hourly" (schedules[0]): cron "61 * * * *": end of range (61) above maximum (59): 61`},
		{"bad-cron-tz.yaml", `schedule "hourly" (schedules[0]): cron "CRON_TZ=Mars/Olympus 0 * * * *": provided bad location Mars/Olympus`},
		{"missing-cron.yaml", `schedule "hourly" (schedules[0]): cron is missing or empty`},
		{"missing-schedule-name.yaml", `schedules[0]: name is missing or empty`},
		{"no-schedules.yaml", `no schedules: the file needs a non-empty "schedules" list`},
		{"empty.yaml", `no schedules: the file needs a non-empty "schedules" list`},
		{"not-yaml.yaml", `invalid YAML: [2:11] could not find end character of double-quoted text`},
		{"does-not-exist.yaml", `schedules file: open testdata/schedules/does-not-exist.yaml: no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "schedules", tt.file)
			_, err := LoadSchedules(path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error\n  %s\nwant it to contain\n  %s", msg, tt.want)
			}
			if tt.file != "does-not-exist.yaml" && !strings.HasPrefix(msg, "schedules file "+path+": ") {
				t.Errorf("error does not name the file: %s", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
		})
	}
}
