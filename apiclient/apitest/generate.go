package apitest

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"
)

// Identifier bases of generated data. Message ids start above 2^53, the
// largest range in which float64 holds every integer, so that a client which
// decodes ids through float64 produces wrong ids and is caught.
const (
	GeneratedProjectIDBase int64 = 1 << 40
	GeneratedMessageIDBase int64 = 1<<53 + 1
)

// createAtLayout is the upstream timestamp format.
const createAtLayout = "2006-01-02 15:04:05"

// Generate returns names projects with messagesPerName messages each,
// derived only from the arguments: the same arguments always give the same
// data, and each project depends only on seed and its index, so
// Generate(n, m, s) is a prefix of Generate(n+1, m, s).
//
// Project i has NFT fmt.Sprintf("proj-%05d.dmail", i) and ID
// GeneratedProjectIDBase+i. Message ids are unique across the result,
// counting up from GeneratedMessageIDBase. Every message has read_count <=
// total, Percent equal to PercentOf(ReadCount, Total), and some have a total
// of zero. Negative counts are treated as zero.
func Generate(names, messagesPerName int, seed int64) []Project {
	names, messagesPerName = max(names, 0), max(messagesPerName, 0)
	ps := make([]Project, names)
	for i := range ps {
		ps[i] = generateProject(i, messagesPerName, seed)
	}
	return ps
}

func generateProject(i, messages int, seed int64) Project {
	nameWords := [...]string{"Lunar", "Pixel", "Harbor", "Quantum", "Velvet", "Cobalt", "Ember", "Atlas", "Nimbus", "Solstice", "Orchid", "Granite"}
	nameKinds := [...]string{"Guild", "Labs", "DAO", "Collective", "Studio", "Network", "Club", "Foundry"}
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	nft := fmt.Sprintf("proj-%05d.dmail", i)
	created := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC).
		Add(time.Duration(rng.Int64N(365*24*3600)) * time.Second)
	wallet := make([]byte, 20)
	for j := range wallet {
		wallet[j] = byte(rng.Uint32())
	}
	name := nameWords[rng.IntN(len(nameWords))] + " " + nameKinds[rng.IntN(len(nameKinds))]
	p := Project{
		ID:            GeneratedProjectIDBase + int64(i),
		NFT:           nft,
		Name:          name,
		Description:   fmt.Sprintf("News & announcements from %s, delivered to <subscribers> by mail.", name),
		Logo:          fmt.Sprintf("https://static.example.com/logos/%s.png", nft),
		Type:          1 + rng.Int64N(3),
		WalletAddress: "0x" + hex.EncodeToString(wallet),
		CreateAt:      created.Format(createAtLayout),
		Messages:      make([]Message, messages),
	}
	sent := created
	for j := range p.Messages {
		sent = sent.Add(time.Duration(1+rng.Int64N(48*3600)) * time.Second)
		p.Messages[j] = generateMessage(rng, nft, GeneratedMessageIDBase+int64(i)*int64(messages)+int64(j), sent)
	}
	return p
}

func generateMessage(rng *rand.Rand, sender string, id int64, sent time.Time) Message {
	recvGroups := [...]string{"all_subscribers", "holders", "whitelist", "custom"}
	subjectFmts := [...]string{
		"Weekly update #%d",
		"Mint opens in %d hours",
		"Governance vote: proposal %d is live",
		"Airdrop claim window closes in %d days",
		"Community AMA, episode %d",
		"Security notice & wallet hygiene (part %d)",
		"Season %d rewards are here",
		"Maintenance window: %d minutes of downtime",
	}
	var total int64
	if rng.IntN(20) != 0 { // one message in twenty reached nobody
		total = 1 + rng.Int64N(5000)
	}
	read := rng.Int64N(total + 1)
	m := Message{
		ID:        id,
		Sender:    sender,
		RecvGroup: recvGroups[rng.IntN(len(recvGroups))],
		Subject:   fmt.Sprintf(subjectFmts[rng.IntN(len(subjectFmts))], 1+rng.IntN(99)),
		Type:      2,
		CreateAt:  sent.Format(createAtLayout),
		ReadCount: read,
		Total:     total,
		Percent:   PercentOf(read, total),
	}
	if m.RecvGroup == "all_subscribers" {
		m.IsAllSubscribers = true
	} else {
		m.Receivers = make([]string, 1+rng.IntN(3))
		for k := range m.Receivers {
			m.Receivers[k] = fmt.Sprintf("user%04d.dmail", rng.IntN(10000))
		}
	}
	if rng.IntN(10) == 0 {
		m.Type = 1
	}
	return m
}

// SampleProjects returns a small hand-written data set for demos: five
// projects with a few messages each. It includes a project whose nft name is
// not ASCII ("café-☕.eth"), one whose name has spaces, '&', '+', '=' and
// '%', one whose id is 2^53+1, one without messages, and a message with a
// total of zero. Each call returns fresh values the caller may modify.
func SampleProjects() []Project {
	return []Project{
		{
			ID: 1001, NFT: "dmail.dmail", Name: "Dmail Network",
			Description:   "Official announcements from the Dmail team.",
			Logo:          "https://static.example.com/logos/dmail.png",
			Type:          1,
			WalletAddress: "0x5b38da6a701c568545dcfcb03fcb875f56beddc4",
			CreateAt:      "2023-02-14 09:30:00",
			Extra:         map[string]any{"website": "https://dmail.example.com", "status": 1},
			Messages: []Message{
				sampleMessage(50001, "dmail.dmail", "Welcome to Dmail!", "2023-02-15 10:00:00", 1200, 600, true),
				sampleMessage(50002, "dmail.dmail", "Points season 2 & referral rules", "2023-03-01 18:45:12", 1500, 1234, true),
				sampleMessage(50003, "dmail.dmail", "Beta testers: your feedback <please>", "2023-03-20 08:00:00", 3, 1, false, "alice.dmail", "bob.dmail", "carol.dmail"),
			},
		},
		{
			ID: 1002, NFT: "café-☕.eth", Name: "Café ☕ Collective",
			Description:   "Coffee lovers, \"specialty\" beans\nand weekly tastings.",
			Logo:          "https://static.example.com/logos/caf%C3%A9.png",
			Type:          2,
			WalletAddress: "0xab8483f64d9c6d1ecf9b849ae677dd3315835cb2",
			CreateAt:      "2023-05-01 07:15:00",
			Messages: []Message{
				sampleMessage(50101, "café-☕.eth", "Nouveau menu : crème brûlée latte 🍮", "2023-05-02 07:30:00", 800, 123, true),
				sampleMessage(50102, "café-☕.eth", "Tasting night — 東京 roastery", "2023-05-09 19:00:00", 0, 0, false),
			},
		},
		{
			ID: 1003, NFT: "r&d + growth=100% lab.dmail", Name: "R&D + Growth Lab",
			Description:   "Experiments at 100% & beyond.",
			Logo:          "https://static.example.com/logos/rd-lab.png",
			Type:          1,
			WalletAddress: "0x4b20993bc481177ec7e8f571cecae8a9e22c02db",
			CreateAt:      "2023-06-10 12:00:00",
			Extra:         map[string]any{"twitter": "@rd_lab", "tags": []string{"research", "growth"}},
			Messages: []Message{
				sampleMessage(50201, "r&d + growth=100% lab.dmail", "Q3 roadmap: a=b & c<d", "2023-06-11 09:00:00", 250, 250, false, "team & friends.dmail", "investor+1.dmail"),
				sampleMessage(50202, "r&d + growth=100% lab.dmail", "Hiring: 2 engineers", "2023-07-01 10:10:10", 4000, 37, true),
			},
		},
		{
			ID: 9007199254740993, NFT: "bigid.dmail", Name: "Big Id Project",
			Description:   "An id just above 2^53, which float64 cannot hold.",
			Logo:          "https://static.example.com/logos/bigid.png",
			Type:          3,
			WalletAddress: "0x78731d3ca6b7e34ac0f824c42a7cc18a495cabab",
			CreateAt:      "2024-01-01 00:00:00",
			Messages: []Message{
				sampleMessage(9007199254740995, "bigid.dmail", "Ids that break float64", "2024-01-02 03:04:05", 7, 3, true),
			},
		},
		{
			ID: 1005, NFT: "quiet.dmail", Name: "Quiet Project",
			Description:   "Registered, never sent anything.",
			Logo:          "",
			Type:          1,
			WalletAddress: "0x617f2e2fd72fd9d5503197092ac168c91465e7f2",
			CreateAt:      "2024-03-03 03:03:03",
			Messages:      []Message{},
		},
	}
}

func sampleMessage(id int64, sender, subject, createAt string, total, read int64, all bool, receivers ...string) Message {
	group := "all_subscribers"
	if !all {
		group = "custom"
	}
	return Message{
		ID:               id,
		Sender:           sender,
		RecvGroup:        group,
		Receivers:        receivers,
		Subject:          subject,
		Type:             2,
		IsAllSubscribers: all,
		CreateAt:         createAt,
		ReadCount:        read,
		Total:            total,
		Percent:          PercentOf(read, total),
	}
}
