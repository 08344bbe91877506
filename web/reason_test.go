package web

import (
	"fmt"
	"net/http"
	"testing"
)

// A discard's or drop's reason with a control character other than tab
// is refused, as an operator's name with one is: the audit record carries
// it as is. A tab is taken.
func TestAReasonWithControlCharactersIsRefusedByTheAPI(t *testing.T) {
	bad := []string{`"noise\u001b[2K"`, `"noise\u0000"`, `"a\nb"`, `"a\u0085b"`}
	t.Run("a discard", func(t *testing.T) {
		f := newFixture(t, Config{})
		_, conflict, _ := f.hold()
		path := fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict)
		for _, r := range bad {
			f.post(path, `{"reason": `+r+`}`).want(t, http.StatusBadRequest, nil)
		}
		var res resolution
		f.post(path, `{"reason": "sensor\tresent"}`).want(t, http.StatusOK, &res)
		if res.Reason != "sensor\tresent" {
			t.Fatalf("discard: %+v", res)
		}
	})
	t.Run("a drop", func(t *testing.T) {
		f := newFixture(t, Config{}, withAlerts)
		es := f.heldAlerts(1)
		path := fmt.Sprintf("/api/v1/outbox/%d/drop", es[0].ID)
		for _, r := range bad {
			f.post(path, `{"reason": `+r+`}`).want(t, http.StatusBadRequest, nil)
			f.post(fmt.Sprintf("/api/v1/outbox/%d/retry", es[0].ID), `{"reason": `+r+`}`).want(t, http.StatusBadRequest, nil)
		}
		var res forwardResolution
		f.post(path, `{"reason": "entered\tby hand"}`).want(t, http.StatusOK, &res)
		if res.Reason != "entered\tby hand" {
			t.Fatalf("drop: %+v", res)
		}
	})
}
