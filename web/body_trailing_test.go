package web

import (
	"fmt"
	"net/http"
	"testing"
)

// A body with a stray closing bracket after the object is not one JSON
// object: it is refused like any other trailing data.
func TestWriteBodyWithTrailingBracketIsRefused(t *testing.T) {
	f := newFixture(t, Config{})
	below, conflict, _ := f.hold()
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict), `{"reason": "x"}}`).want(t, http.StatusBadRequest, nil)
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), `{}]`).want(t, http.StatusBadRequest, nil)
}
