package sync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/robfig/cron/v3"
)

// Schedule is one entry of schedules.yaml: a cron expression and the
// sources of the nft names a pass on it walks (see names.go).
type Schedule struct {
	Name string
	Cron string
	// NFTNames is the inline list (nft_names), nil when the schedule has
	// none.
	NFTNames []string
	// NamesFile is the path of its nft_names_file, relative to the
	// schedules file's directory once LoadSchedules has read it.
	NamesFile string
	// NamesQuery is its nft_names_query.
	NamesQuery string
	// Spec is Cron parsed.
	Spec cron.Schedule
}

// CronParser is the parser schedules are validated and run with: five
// fields, descriptors such as @hourly and @every 10m, and an optional
// CRON_TZ= prefix.
func CronParser() cron.Parser {
	return cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

// LoadSchedules reads and validates the schedules file at path. Errors name
// the file and, where one is at fault, the schedule.
func LoadSchedules(path string) ([]Schedule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schedules file: %w", err)
	}
	s, err := ParseSchedules(data)
	if err != nil {
		return nil, fmt.Errorf("schedules file %s: %w", path, err)
	}
	for i := range s {
		if f := s[i].NamesFile; f != "" && !filepath.IsAbs(f) {
			s[i].NamesFile = filepath.Join(filepath.Dir(path), f)
		}
	}
	return s, nil
}

var scheduleKeys = []string{"name", "cron", SourceInline, SourceFile, SourceQuery}

// ParseSchedules decodes and validates a schedules document. Unknown keys,
// a missing or empty schedules list, empty or duplicate schedule names,
// invalid cron expressions, a schedule with no source of names, and an
// empty nft_names list with no other source are errors.
func ParseSchedules(data []byte) ([]Schedule, error) {
	var doc struct {
		Schedules []map[string]any `yaml:"schedules"`
	}
	if err := yaml.UnmarshalWithOptions(data, &doc, yaml.Strict()); err != nil {
		return nil, &yamlError{err}
	}
	if len(doc.Schedules) == 0 {
		return nil, errors.New("no schedules: the file needs a non-empty \"schedules\" list")
	}
	out := make([]Schedule, 0, len(doc.Schedules))
	seen := make(map[string]int, len(doc.Schedules))
	parser := CronParser()
	for i, raw := range doc.Schedules {
		s, err := parseSchedule(raw, i, parser)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("schedule %q (schedules[%d]): name already used by schedules[%d]", s.Name, i, j)
		}
		seen[s.Name] = i
		out = append(out, s)
	}
	return out, nil
}

func parseSchedule(raw map[string]any, i int, parser cron.Parser) (Schedule, error) {
	where := fmt.Sprintf("schedules[%d]", i)
	name, err := stringField(raw, "name")
	if err != nil {
		return Schedule{}, fmt.Errorf("%s: %w", where, err)
	}
	if strings.TrimSpace(name) == "" {
		return Schedule{}, fmt.Errorf("%s: name is missing or empty", where)
	}
	where = fmt.Sprintf("schedule %q (%s)", name, where)
	if err := unknownKeys(raw); err != nil {
		return Schedule{}, fmt.Errorf("%s: %w", where, err)
	}
	expr, err := stringField(raw, "cron")
	if err != nil {
		return Schedule{}, fmt.Errorf("%s: %w", where, err)
	}
	if strings.TrimSpace(expr) == "" {
		return Schedule{}, fmt.Errorf("%s: cron is missing or empty", where)
	}
	spec, err := parser.Parse(expr)
	if err != nil {
		return Schedule{}, fmt.Errorf("%s: cron %q: %w", where, expr, err)
	}
	s := Schedule{Name: name, Cron: expr, Spec: spec}
	for _, f := range []struct {
		key string
		dst *string
	}{{SourceFile, &s.NamesFile}, {SourceQuery, &s.NamesQuery}} {
		key, dst := f.key, f.dst
		v, err := stringField(raw, key)
		if err != nil {
			return Schedule{}, fmt.Errorf("%s: %w", where, err)
		}
		if _, set := raw[key]; set && strings.TrimSpace(v) == "" {
			return Schedule{}, fmt.Errorf("%s: %s is empty", where, key)
		}
		*dst = v
	}
	if s.NamesQuery != "" {
		s.NamesQuery = strings.TrimSpace(s.NamesQuery)
	}
	if _, inline := raw[SourceInline]; inline || !s.Dynamic() {
		if s.NFTNames, err = nftNames(raw[SourceInline], s.Dynamic()); err != nil {
			return Schedule{}, fmt.Errorf("%s: %w", where, err)
		}
	}
	return s, nil
}

func unknownKeys(raw map[string]any) error {
	var unknown []string
	for k := range raw {
		if !slices.Contains(scheduleKeys, k) {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("unknown key %s (known: %s)", strings.Join(unknown, ", "), strings.Join(scheduleKeys, ", "))
}

func stringField(raw map[string]any, key string) (string, error) {
	v, ok := raw[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s must be a string, found %v (quote it)", key, v)
	}
	return s, nil
}

// nftNames validates a schedule's inline names, keeping their order and
// dropping repeats; an empty list is an error unless other sources may
// give names. Names are kept byte for byte: spaces and any Unicode are
// valid.
func nftNames(v any, others bool) ([]string, error) {
	list, ok := v.([]any)
	if v != nil && !ok {
		return nil, fmt.Errorf("nft_names must be a list, found %v", v)
	}
	if len(list) == 0 && !others {
		return nil, errors.New("nft_names is missing or empty, and neither nft_names_file nor nft_names_query is set")
	}
	names := make([]string, 0, len(list))
	seen := make(map[string]bool, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("nft_names[%d] must be a string, found %v (quote it)", i, item)
		}
		if strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("nft_names[%d] is empty", i)
		}
		if !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	return names, nil
}

// Names returns every inline nft name of the schedules once, in the order
// first listed, so that a name several schedules share is fetched once a
// pass.
func Names(schedules []Schedule) []string {
	var all []string
	for _, s := range schedules {
		all = append(all, s.NFTNames...)
	}
	return dedupe(all)
}

// yamlError keeps a YAML error to one line (position and message) instead
// of the library's multi-line source excerpt, which would break log lines.
type yamlError struct{ err error }

func (e *yamlError) Error() string {
	return "invalid YAML: " + strings.TrimSpace(yaml.FormatError(e.err, false, false))
}

func (e *yamlError) Unwrap() error { return e.err }

// LongestInterval is the longest time between two consecutive ticks of
// the schedule over a year from the start of 2026 (up to 10 000 ticks),
// or that year when it ticks less than twice in it.
func (s Schedule) LongestInterval() time.Duration {
	const year = 366 * 24 * time.Hour
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := s.Spec.Next(start)
	longest := time.Duration(0)
	for range 10_000 {
		next := s.Spec.Next(prev)
		if next.IsZero() || next.Sub(start) > year {
			break
		}
		longest = max(longest, next.Sub(prev))
		prev = next
	}
	if longest == 0 {
		return year
	}
	return longest
}
