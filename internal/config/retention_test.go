package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRetentions holds READSYNC_RETAIN_RAW and READSYNC_RETAIN_DAILY to
// their forms and rules, against the hourly schedule of validEnv and a
// daily one.
func TestRetentions(t *testing.T) {
	for _, tc := range []struct {
		raw, hourly, daily string
		daily2             bool // a second schedule, @daily
		wantRaw            time.Duration
		wantDaily          time.Duration
		wantHourly         time.Duration
		wantErr            string // in the error; empty for none
	}{
		{raw: "", daily: "", wantRaw: 0, wantDaily: 0},
		{raw: "0", daily: "0"},
		{raw: "90d", hourly: "90d", daily: "730d", wantHourly: 90 * 24 * time.Hour, wantRaw: 90 * 24 * time.Hour, wantDaily: 730 * 24 * time.Hour},
		{raw: "2h", wantRaw: 2 * time.Hour},
		{raw: "36h", hourly: "36h", daily: "36h", wantRaw: 36 * time.Hour, wantHourly: 36 * time.Hour, wantDaily: 36 * time.Hour},
		{raw: "90", wantErr: `READSYNC_RETAIN_RAW="90": a duration such as 90d (days) or 720h, or 0 or empty to keep forever`},
		{raw: "-1d", wantErr: `READSYNC_RETAIN_RAW="-1d": a duration such as 90d`},
		{raw: "1.5d", wantErr: `READSYNC_RETAIN_RAW="1.5d": a duration such as 90d`},
		{raw: "-5h", wantErr: `READSYNC_RETAIN_RAW="-5h": a duration such as 90d`},
		{daily: "soon", wantErr: `READSYNC_RETAIN_DAILY="soon": a duration such as 90d`},
		// Shorter than two intervals of a schedule.
		{raw: "90m", wantErr: `READSYNC_RETAIN_RAW="90m": shorter than two intervals of schedule "hourly" ("0 * * * *", up to 1h0m0s apart)`},
		{raw: "36h", daily2: true, wantErr: `READSYNC_RETAIN_RAW="36h": shorter than two intervals of schedule "daily" ("@daily", up to 24h0m0s apart): a snapshot's reads gained are computed from the one before it; keep at least 2d`},
		{raw: "2d", daily2: true, wantRaw: 48 * time.Hour},
		// The coarser keeps longer; forever is longest.
		{raw: "90d", hourly: "90d", daily: "30d", wantErr: `READSYNC_RETAIN_DAILY="30d": shorter than READSYNC_RETAIN_HOURLY="90d" (90d)`},
		{raw: "90d", daily: "30d", wantErr: `READSYNC_RETAIN_DAILY="30d": shorter than READSYNC_RETAIN_HOURLY="" (forever): a coarser resolution keeps its rows at least as long as a finer one; set it to 0 to keep them forever too`},
		{raw: "90d", hourly: "30d", wantErr: `READSYNC_RETAIN_HOURLY="30d": shorter than READSYNC_RETAIN_RAW="90d" (90d)`},
		{raw: "", hourly: "30d", daily: "40d", wantErr: `READSYNC_RETAIN_HOURLY="30d": shorter than READSYNC_RETAIN_RAW="" (forever)`},
		{raw: "90d", hourly: "365d", daily: "0", wantRaw: 90 * 24 * time.Hour, wantHourly: 365 * 24 * time.Hour},
		{raw: "7d", hourly: "90d", daily: "730d", wantRaw: 7 * 24 * time.Hour, wantHourly: 90 * 24 * time.Hour, wantDaily: 730 * 24 * time.Hour},
	} {
		t.Run(tc.raw+"/"+tc.hourly+"/"+tc.daily, func(t *testing.T) {
			env := validEnv(t)
			env["READSYNC_RETAIN_RAW"], env["READSYNC_RETAIN_HOURLY"], env["READSYNC_RETAIN_DAILY"] = tc.raw, tc.hourly, tc.daily
			if tc.daily2 {
				doc := "schedules:\n  - name: hourly\n    cron: \"0 * * * *\"\n    nft_names: [a.dmail]\n  - name: daily\n    cron: \"@daily\"\n    nft_names: [b.dmail]\n"
				path := filepath.Join(t.TempDir(), "schedules.yaml")
				if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
					t.Fatal(err)
				}
				env["READSYNC_SCHEDULES_FILE"] = path
			}
			cfg, err := Load(context.Background(), env, Needs{API: true, DSN: true})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RetainRaw.Duration() != tc.wantRaw || cfg.RetainHourly.Duration() != tc.wantHourly || cfg.RetainDaily.Duration() != tc.wantDaily {
				t.Errorf("raw %s, hourly %s, daily %s; want %s, %s, %s", cfg.RetainRaw.Duration(), cfg.RetainHourly.Duration(), cfg.RetainDaily.Duration(),
					tc.wantRaw, tc.wantHourly, tc.wantDaily)
			}
		})
	}
}
