package apitest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
)

// Project is a registered project as the fake serves it. The details
// operation returns it as a project record, looked up by NFT; the list
// operation returns its Messages, looked up by ID.
//
// The Server copies a Project when it is handed over (WithProjects,
// SetProject), including its Messages, their Receivers and the top level of
// every Extra map. Values nested inside Extra are shared and must not be
// modified afterwards.
type Project struct {
	ID            int64
	NFT           string
	Name          string
	Description   string
	Logo          string
	Type          int64
	WalletAddress string
	// CreateAt is served as given; the upstream format is
	// "YYYY-MM-DD HH:MM:SS".
	CreateAt string

	// Extra holds additional fields of the project record; the upstream
	// specification says records carry fields beyond the documented ones. A
	// key naming a documented field replaces that field's value in place,
	// which lets tests serve odd values (a null name, a string id). The
	// remaining keys follow the documented fields in sorted order. Values
	// are encoded with encoding/json; json.RawMessage is served verbatim.
	Extra map[string]any

	// Messages are the project's sent messages, served in this order as
	// data.list.
	Messages []Message

	// RawList, when non-nil, is served verbatim as data.list instead of
	// Messages, valid JSON or not: for example `null`, `[]`, or hand-written
	// records with unexpected value types.
	RawList json.RawMessage
}

// Message is a sent-message record, an element of data.list.
type Message struct {
	ID int64
	// Sender is the nft domain name of the sending project.
	Sender    string
	RecvGroup string
	// Receivers is served as [] when nil, as the upstream does not document
	// null here; use Extra to serve null.
	Receivers        []string
	Subject          string
	Type             int64
	IsAllSubscribers bool
	// CreateAt is served as given; the upstream format is
	// "YYYY-MM-DD HH:MM:SS".
	CreateAt string

	// ReadCount and Total are read_data.read_count and read_data.total.
	ReadCount int64
	Total     int64
	// Percent is read_data.percent, served exactly as given so that tests
	// can send an empty or malformed value; PercentOf computes a well-formed
	// one. When the server applies read growth (see
	// WithReadGrowth) it serves PercentOf of the grown count instead.
	Percent string

	// Extra holds additional fields of the record, with the same rules as
	// Project.Extra.
	Extra map[string]any
}

// PercentOf formats read as a percentage of total in the upstream format of
// read_data.percent: two fractional digits followed by "%" (1 of 8 is
// "12.50%"). The specification leaves rounding open; PercentOf rounds half
// up. A total of zero or less gives "0.00%".
func PercentOf(read, total int64) string {
	if total <= 0 {
		return "0.00%"
	}
	var hundredths string
	if read >= 0 && read <= total && total < 1<<40 {
		// Integer arithmetic avoids float artefacts such as 12.345 → "12.34".
		hundredths = strconv.FormatInt((read*20000+total)/(2*total), 10)
	} else {
		n := new(big.Int).Mul(big.NewInt(read), big.NewInt(20000))
		n.Add(n, big.NewInt(total))
		d := new(big.Int).Mul(big.NewInt(total), big.NewInt(2))
		// Div rounds towards negative infinity for a positive divisor, which
		// keeps half-up rounding correct for negative counts too.
		hundredths = n.Div(n, d).String()
	}
	return formatHundredths(hundredths) + "%"
}

// formatHundredths inserts the decimal point into a decimal integer string
// counting hundredths.
func formatHundredths(s string) string {
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	for len(s) < 3 {
		s = "0" + s
	}
	return sign + s[:len(s)-2] + "." + s[len(s)-2:]
}

// clone returns a copy of p that shares no mutable memory with p except
// values nested inside Extra maps.
func (p Project) clone() Project {
	p.Extra = maps.Clone(p.Extra)
	p.RawList = slices.Clone(p.RawList)
	p.Messages = slices.Clone(p.Messages)
	for i := range p.Messages {
		m := &p.Messages[i]
		m.Receivers = slices.Clone(m.Receivers)
		m.Extra = maps.Clone(m.Extra)
	}
	return p
}

// checkExtra reports the first Extra value of p or its messages that
// encoding/json cannot encode.
func (p *Project) checkExtra() error {
	if err := checkEncodable(p.Extra); err != nil {
		return fmt.Errorf("project %q: %w", p.NFT, err)
	}
	for i := range p.Messages {
		if err := checkEncodable(p.Messages[i].Extra); err != nil {
			return fmt.Errorf("project %q, message %d: %w", p.NFT, p.Messages[i].ID, err)
		}
	}
	return nil
}

func checkEncodable(extra map[string]any) error {
	for k, v := range extra {
		if _, err := json.Marshal(v); err != nil {
			return fmt.Errorf("extra field %q: %w", k, err)
		}
	}
	return nil
}
