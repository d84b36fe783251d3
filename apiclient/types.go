package apiclient

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Project is the record returned by the project-details operation. Only the
// fields readsync stores are typed; Raw keeps the whole record exactly as the
// upstream sent it, so fields the spec does not list are never lost.
type Project struct {
	ID            int64  `json:"id"`
	CreateAt      string `json:"create_at"`
	Name          string `json:"name"`
	Description   string `json:"description"`
	Logo          string `json:"logo"`
	Type          int64  `json:"type"`
	WalletAddress string `json:"wallet_address"`
	NFT           string `json:"nft"`

	// Raw is the project record's JSON as received (the envelope's data value).
	Raw json.RawMessage `json:"-"`
}

// Message is one element of the sent-message list.
type Message struct {
	ID               int64     `json:"id"`
	ReadData         *ReadData `json:"read_data"`
	CreateAt         string    `json:"create_at"`
	Sender           string    `json:"sender"`
	RecvGroup        string    `json:"recv_group"`
	Receivers        []string  `json:"receivers"`
	Subject          string    `json:"subject"`
	Type             int64     `json:"type"`
	IsAllSubscribers bool      `json:"is_all_subscribers"`
}

// ReadData holds a message's read statistics as the upstream reports them.
type ReadData struct {
	Percent   Percent `json:"percent"`
	ReadCount int64   `json:"read_count"`
	Total     int64   `json:"total"`
}

// Percent is the upstream's percent value kept as text. The spec promises a
// string such as "50.00%", but a decoder that failed a whole project over a
// number or null here would lose the message's counts, which are the part
// that matters; interpreting the text is left to the sync rules.
type Percent string

// UnmarshalJSON accepts a JSON string, number or null.
func (p *Percent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*p = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("percent: %w", err)
		}
		*p = Percent(s)
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*p = Percent(b)
	default:
		return fmt.Errorf("percent: unexpected JSON value %.40q", b)
	}
	return nil
}
