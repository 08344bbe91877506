package shared

import (
	"strconv"
	"strings"
)

// NamedMembers names member ids in a message: `member "a"`, or
// `members "a", "b"`.
func NamedMembers(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	if len(q) == 1 {
		return "member " + q[0]
	}
	return "members " + strings.Join(q, ", ")
}
