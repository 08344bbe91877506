package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// errorOf is the message of a JSON error body.
func errorOf(t *testing.T, r response) string {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return e.Error
}

// An asset that does not exist is answered like every other error, a
// JSON body naming what was asked for; one that exists is served.
func TestAMissingAssetIsAJSONError(t *testing.T) {
	f := newFixture(t, Config{})
	r := f.get("/assets/nonexistent")
	r.want(t, http.StatusNotFound, nil)
	if msg := errorOf(t, r); !strings.Contains(msg, "/assets/nonexistent") {
		t.Fatalf("error %q does not name the asset", msg)
	}
	if r := f.get("/assets/app.js"); r.code != http.StatusOK || len(r.body) == 0 {
		t.Fatalf("GET /assets/app.js: status %d, %d bytes", r.code, len(r.body))
	}
}

// A body that gives a key twice could be read either way: it is refused
// with 400 naming the key, and the entry stays held.
func TestAWriteBodyThatGivesAKeyTwiceIsRefused(t *testing.T) {
	f := newFixture(t, Config{})
	_, conflict, _ := f.hold()
	path := fmt.Sprintf("/api/v1/quarantine/%d", conflict)
	r := f.post(path+"/discard", `{"reason": "x", "reason": "y"}`)
	r.want(t, http.StatusBadRequest, nil)
	if msg := errorOf(t, r); !strings.Contains(msg, `"reason"`) {
		t.Fatalf("error %q does not name the key given twice", msg)
	}
	f.get(path).want(t, http.StatusOK, nil)
	f.post(path+"/discard", `{"reason": "x"}`).want(t, http.StatusOK, nil)
}

func TestRepeatedKeyFindsAKeyAnObjectGivesTwice(t *testing.T) {
	for _, c := range []struct {
		body, key string
	}{
		{`{"reason": "x", "reason": "y"}`, "reason"},
		{`{"a": {"b": 1, "b": 2}}`, "b"},
		{`{"a": [{"k": 1}, {"k": 2}], "b": "a"}`, ""},
		{`{"a": {"a": "a"}, "b": ["b", "b"]}`, ""},
		{`{"a": [{"k": 1, "k": 2}]}`, "k"},
	} {
		key, ok := repeatedKey([]byte(c.body))
		if key != c.key || ok != (c.key != "") {
			t.Errorf("repeatedKey(%s) = %q, %v; want %q", c.body, key, ok, c.key)
		}
	}
}
