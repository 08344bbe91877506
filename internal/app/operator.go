package app

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Resolve is an operator's decision on a held entry: a quarantined
// message (release, discard) or a held outbox entry (retry, drop).
type Resolve struct {
	Action string // release or discard; retry or drop
	ID     uint64
	// Reason says why; required to discard or drop, a note for the audit
	// on a retry.
	Reason string
	// Operator is who decides on a local store, for the audit (--operator;
	// default the OS user, see LocalOperator). Through a running daemon's
	// API the token names the operator, and a set Operator is refused.
	Operator string
	// Member is whose outbox holds the entry on a shared store (default
	// the one member whose held entries have ID). Outbox entries only.
	Member string
}

// LocalOperator is who decides on a local store: name (--operator),
// trimmed, else the OS user (os/user, then $USER). The audit record
// carries it as is, so a name with control characters or invalid UTF-8 is
// refused with ErrUsage.
func LocalOperator(name string) (string, error) {
	if name := strings.TrimSpace(name); name != "" {
		// The same rule as a token's name: the audit record shows it as is.
		switch {
		case len(name) > maxOperatorBytes:
			return "", fmt.Errorf("%w: --operator is %d bytes, over %d", ErrUsage, len(name), maxOperatorBytes)
		case strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name):
			return "", fmt.Errorf("%w: --operator %q has control characters or invalid UTF-8", ErrUsage, name)
		}
		return name, nil
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	if name := os.Getenv("USER"); name != "" {
		return name, nil
	}
	return "", fmt.Errorf("%w: cannot tell who you are (no OS user name, $USER unset): give --operator NAME", ErrUsage)
}

// The bounds of an operator's name and a reason, the API's: a decision
// made from the CLI on a local store is the same decision, and its audit
// record, which every sink sends on, stays as small.
const (
	maxOperatorBytes = 200
	maxReasonBytes   = 4096
)

// checkReason refuses a --reason over maxReasonBytes, or with a control
// character other than tab, or invalid UTF-8, with ErrUsage, as
// LocalOperator refuses such a name: the audit record carries it as is.
func checkReason(reason string) error {
	if len(reason) > maxReasonBytes {
		return fmt.Errorf("%w: --reason is %d bytes, over %d", ErrUsage, len(reason), maxReasonBytes)
	}
	if strings.ContainsFunc(reason, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) || !utf8.ValidString(reason) {
		return fmt.Errorf("%w: --reason %q has control characters (a tab is allowed) or invalid UTF-8", ErrUsage, reason)
	}
	return nil
}

// errOperatorRemote refuses --operator through a running daemon's API
// that a token is sent to: the token names the operator.
func errOperatorRemote() error {
	return fmt.Errorf("%w: --operator is not taken with an API token: the running daemon names the operator "+
		"from the token (choose it with --token-name or $%s)", ErrUsage, EnvToken)
}
