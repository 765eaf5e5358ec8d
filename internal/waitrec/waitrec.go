// Package waitrec is the layout of relock's wait records: who waits for
// what, since when. A Client keeps its waiting calls in one hash of its
// own, so that an operator (relock waits, relock status, relock top) and
// the deadlock detector can join them with the holders that the locks'
// hashes already name.
//
// The hash is Key(prefix, clientID): "<prefix>relock_waits:{<clientID>}".
// Each field is one waiting call (a number the Client gives, unique in
// the hash); its value is a Record in JSON. The Client sets the hash's
// expiry to its watchdog timeout when it writes a record and renews it on
// every watchdog tick while it has records; a record is deleted (HDEL)
// when its wait ends. A Client that dies leaves a hash that expires on
// its own.
//
// Since is the server's time (milliseconds since the Unix epoch) when the
// record was written, so that waits of Clients on different machines
// compare without clock skew; readers take "now" from the server too
// (TIME).
package waitrec

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Base is the part of every wait record hash's key before the Client ID
// tag; with a key prefix, the key starts with the prefix.
const Base = "relock_waits"

// Key is the wait record hash of the Client clientID under the key prefix
// prefix ("" for none). The Client ID is the hash tag, so that a Client's
// records are one key on Redis Cluster.
func Key(prefix, clientID string) string {
	return prefix + Base + ":{" + clientID + "}"
}

// Pattern is the SCAN pattern that matches every wait record hash under
// the key prefix prefix. Glob characters in the prefix are escaped.
func Pattern(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteString(Base + ":{*}")
	return b.String()
}

// ClientID is the Client ID of a wait record hash's key under the key
// prefix prefix, or false when key is not one.
func ClientID(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+Base+":{")
	if !ok || !strings.HasSuffix(rest, "}") || len(rest) < 2 {
		return "", false
	}
	return strings.TrimSuffix(rest, "}"), true
}

// Record is one waiting call.
type Record struct {
	// Owner is the waiter as a lock's hash names a holder: the field
	// "<clientID>:<owner>" (see layout.Field), so that the wait-for graph
	// joins records and holders by equal strings. For a call without an
	// owner in its context it is the owner the Client made up for it.
	Owner string `json:"owner"`
	// Name is the name waited for as its keys are derived: with the key
	// prefix (what Core.Map returns).
	Name string `json:"name"`
	// Kind is the kind waited for, as observe's Kind constants name it
	// ("lock", "fenced", "fair", "read", "write", "semaphore",
	// "counting_semaphore", "rate_limiter", "spin", "latch").
	Kind string `json:"kind"`
	// Since is when the wait was recorded: server time in milliseconds
	// since the Unix epoch.
	Since int64 `json:"since"`
}

// Encode is the value of r's field. Since is left out when it is 0: the
// script that writes the record puts in the server's time (see Stamp).
func (r Record) Encode() string {
	b, _ := json.Marshal(struct {
		Owner string `json:"owner"`
		Name  string `json:"name"`
		Kind  string `json:"kind"`
	}{r.Owner, r.Name, r.Kind})
	if r.Since != 0 {
		return Stamp(string(b), r.Since)
	}
	return string(b)
}

// Stamp puts since into an encoded record that has none, as the script
// that writes a record does with the server's time: the record's JSON
// object gets a "since" member at its end.
func Stamp(encoded string, since int64) string {
	return strings.TrimSuffix(encoded, "}") + fmt.Sprintf(`,"since":%d}`, since)
}

// Decode reads a record's value.
func Decode(value string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return Record{}, fmt.Errorf("wait record %q: %w", value, err)
	}
	if r.Owner == "" || r.Name == "" || r.Kind == "" {
		return Record{}, fmt.Errorf("wait record %q: owner, name or kind missing", value)
	}
	return r, nil
}
