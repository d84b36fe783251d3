package status

import (
	"fmt"
	"html"
	"strings"
	"time"
)

// The page is written by the functions below rather than by html/template:
// the template engine calls methods by name through reflection, and a
// binary that can do so keeps every exported method of every type it
// links, which made readsync's binary a third larger and its resident
// memory a few MiB larger, for one page. Each value of the Status is
// escaped with html.EscapeString where it is written (none is a URL, a
// script or a style); the times, durations and sizes formatted here hold
// no markup.

// htmlWriter builds the page: raw writes its parts as they are, markup
// and the values esc has escaped.
type htmlWriter struct{ strings.Builder }

func (w *htmlWriter) raw(parts ...string) {
	for _, s := range parts {
		w.WriteString(s)
	}
}

// esc is a value as text of the page.
func esc(v any) string { return html.EscapeString(fmt.Sprint(v)) }

const pageHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>readsync status</title>
<link rel="icon" href="data:,">
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.1em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin-top: 0.5em; }
th, td { text-align: left; padding: 0.25em 0.8em 0.25em 0; vertical-align: top; }
th { font-weight: 600; border-bottom: 1px solid #ddd; }
td.num { text-align: right; }
.ok { color: #176f2c; } .partial { color: #a05a00; } .failed, .down { color: #b00020; font-weight: 600; }
.note { color: #666; font-size: 0.9em; }
.banner { background: #fde8ea; border: 1px solid #b00020; padding: 0.6em; margin: 1em 0; }
code { font-size: 0.9em; white-space: nowrap; }
</style>
</head>
<body>
`

// renderPage writes s as the page's HTML.
func renderPage(s Status) string {
	var w htmlWriter
	w.raw(pageHead, "<h1>readsync ", esc(s.Version), "</h1>\n<p class=\"note\">Generated ", when(s.GeneratedAt),
		`. <a href="/status.json">status.json</a> · <a href="/metrics">metrics</a> · <a href="/readyz">readiness</a></p>`, "\n")
	renderDown(&w, s.ClickHouse)
	w.raw("\n\n")
	renderSchedules(&w, s.GeneratedAt, s.Schedules)
	w.raw("\n\n")
	renderFailing(&w, s.Failing)
	w.raw("\n\n")
	renderSpool(&w, s.GeneratedAt, s.Spool)
	w.raw("\n\n")
	renderReconcile(&w, s.Reconcile)
	w.raw("\n\n")
	renderExpiry(&w, s.Expiry)
	w.raw("\n\n")
	renderClickHouse(&w, s.ClickHouse)
	w.raw("\n</body>\n</html>\n")
	return w.String()
}

// renderDown is the banner shown while ClickHouse does not answer.
func renderDown(w *htmlWriter, c ClickHouse) {
	if c.Answering {
		return
	}
	w.raw(
		"\n<div class=\"banner\" id=\"clickhouse-down\"><span class=\"down\">ClickHouse does not answer</span>: ",
		esc(c.Error), ".\n",
	)
	if c.ReadAt != nil {
		w.raw("What follows from ClickHouse was read ", when(c.ReadAt), ", ", secs(c.AgeSeconds), " ago.")
	} else {
		w.raw("Nothing has been read from it since start.")
	}
	w.raw("</div>\n")
}

func renderSchedules(w *htmlWriter, now time.Time, schedules []Schedule) {
	w.raw(`<h2 id="schedules">Schedules</h2>
<table>
<tr><th>Schedule</th><th>Cron</th><th>Shard</th><th>Last pass</th><th>Status</th><th>Duration</th><th>Names ok</th><th>Names failed</th><th>Failing now</th><th>Next pass</th></tr>
`)
	for _, sc := range schedules {
		w.raw(
			"<tr>\n<td>", esc(sc.Name), "</td><td><code>", esc(sc.Cron), "</code></td><td>",
			esc(sc.Shard), "</td>\n",
		)
		if p := sc.LastPass; p != nil {
			w.raw(
				"<td>", when(p.SnapshotAt), "</td><td class=\"", esc(p.Status), "\">",
				esc(p.Status), "</td><td>", secs(p.DurationSeconds), "</td><td class=\"num\">",
				esc(p.NamesOK), "</td><td class=\"num\">", esc(p.NamesFailed), "</td>\n",
			)
		} else {
			w.raw(
				"<td colspan=\"5\" class=\"note\">none recorded in the last ",
				secs(sc.LookBackSeconds), "</td>",
			)
		}
		w.raw(
			"\n<td class=\"num\">", esc(sc.NamesFailing), "</td><td>", when(sc.NextPass), " (",
			ago(now, sc.NextPass), ")</td>\n</tr>",
		)
	}
	w.raw("\n</table>")
}

func renderFailing(w *htmlWriter, f Failing) {
	w.raw("<h2 id=\"failing-names\">Failing names</h2>\n")
	if len(f.Names) == 0 {
		w.raw(`<p class="ok">No name is failing.</p>`)
		return
	}
	w.raw("\n<p>", esc(f.Total), " failing")
	if f.Total > uint64(len(f.Names)) {
		w.raw(", the first ", esc(len(f.Names)), " shown")
	}
	w.raw(`, most passes in a row first.</p>
<table>
<tr><th>Schedule</th><th>Name</th><th>Passes in a row</th><th>Kind</th><th>Last error</th><th>Last failure</th><th>Last success</th></tr>
`)
	for _, n := range f.Names {
		w.raw(
			`<tr class="failing-name"><td>`, esc(n.Schedule), "</td><td>", esc(n.NFT),
			`</td><td class="num">`, esc(n.FailingPasses), "</td><td>", esc(n.Kind),
			"</td><td>", esc(n.LastError), "</td><td>", when(n.LastFailureAt),
			"</td><td>", when(n.LastSuccessAt), "</td></tr>\n",
		)
	}
	w.raw("</table>\n")
}

func renderSpool(w *htmlWriter, now time.Time, s Spool) {
	w.raw(
		"<h2 id=\"spool\">Spool</h2>\n<table>\n<tr><th>Entries</th><td class=\"num\">",
		esc(s.Entries), "</td></tr>\n<tr><th>Bytes</th><td class=\"num\">", byteSize(s.Bytes),
		"</td></tr>\n<tr><th>Oldest entry</th><td>",
	)
	if s.Oldest != nil {
		w.raw(when(s.Oldest), " (", ago(now, s.Oldest), ")")
	} else {
		w.raw("none waiting")
	}
	w.raw("</td></tr>\n<tr><th>Quarantined</th><td class=\"num")
	if s.Quarantined != 0 {
		w.raw(" failed")
	}
	w.raw("\">", esc(s.Quarantined), "</td></tr>\n</table>")
}

func renderReconcile(w *htmlWriter, r Reconcile) {
	w.raw("<h2 id=\"reconcile\">Reconcile</h2>\n<table>\n<tr><th>Last step</th><td>", when(r.LastStepAt))
	if r.HeldBy != "" {
		w.raw(" (the steps are run by ", esc(r.HeldBy), ")")
	}
	if r.Error != "" {
		w.raw(` <span class="failed">failed: `, esc(r.Error), "</span>")
	}
	w.raw("</td></tr>\n<tr><th>Snapshot changes read to</th><td>", readTo(r.SnapshotChangesTo),
		"</td></tr>\n<tr><th>Tick changes read to</th><td>", readTo(r.TickChangesTo),
		"</td></tr>\n<tr><th>Every change read before</th><td>", when(r.ReachedAt),
		"</td></tr>\n<tr><th>Lag</th><td>", secs(r.LagSeconds),
		"</td></tr>\n<tr><th>Changes pending</th><td class=\"num\">", esc(r.Pending), "</td></tr>\n</table>")
}

// readTo is how far the reconcile has read a change log.
func readTo(t *time.Time) string {
	if t == nil {
		return "none read yet"
	}
	return when(t)
}

func renderExpiry(w *htmlWriter, e Expiry) {
	w.raw("<h2 id=\"expiry\">Retention and expiry</h2>\n<table>\n")
	for _, r := range e.Retentions {
		w.raw("<tr><th>", esc(r.Resolution), " rows kept</th><td>", esc(r.Keep), "</td></tr>\n")
	}
	w.raw("<tr><th>Last expiry run</th><td>")
	if e.LastRun != nil {
		w.raw(when(e.LastRun), " by ", esc(e.Owner))
	} else {
		w.raw("none in the last ", secs(e.LookBackSeconds))
	}
	w.raw("</td></tr>\n<tr><th>Last partition dropped</th><td>", when(e.LastDrop))
	if e.Dropped != 0 {
		w.raw(" (", esc(e.Dropped), " in the last ", secs(e.LookBackSeconds), ")")
	}
	w.raw("</td></tr>\n</table>")
}

func renderClickHouse(w *htmlWriter, c ClickHouse) {
	w.raw("<h2 id=\"clickhouse\">ClickHouse</h2>\n<table>\n<tr><th>Answering</th><td>")
	if c.Answering {
		w.raw(`<span class="ok">yes</span>`)
	} else {
		w.raw(`<span class="down">no</span>`)
	}
	w.raw("</td></tr>\n<tr><th>Read</th><td>")
	if c.ReadAt != nil {
		w.raw(when(c.ReadAt), " (", secs(c.AgeSeconds), " ago)")
	} else {
		w.raw("never")
	}
	w.raw(
		"</td></tr>\n<tr><th>Server</th><td>", esc(c.ServerVersion),
		"</td></tr>\n<tr><th>Database</th><td>", esc(c.Database),
		"</td></tr>\n<tr><th>Schema migration</th><td>", esc(c.Migration), " of ", esc(c.Latest),
	)
	if len(c.Pending) > 0 {
		w.raw(` <span class="failed">pending: `)
		for i, m := range c.Pending {
			if i > 0 {
				w.raw(", ")
			}
			w.raw(esc(m))
		}
		w.raw("</span>")
	}
	w.raw("</td></tr>\n</table>")
}
