package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

var namedTokens = []NamedToken{
	{Name: "watch desk", Secret: "v13wer", Role: RoleViewer},
	{Name: "j.doe", Secret: "0perator", Role: RoleOperator},
	{Name: "a.smith", Secret: "0perator2", Role: RoleOperator},
}

func TestTokenRoles(t *testing.T) {
	viewer, operator := []string{"Authorization", "Bearer v13wer"}, []string{"Authorization", "Bearer 0perator"}
	t.Run("a viewer may neither release nor discard", func(t *testing.T) {
		f := newFixture(t, Config{Tokens: namedTokens})
		below, conflict, _ := f.hold()
		for _, req := range []struct{ path, body string }{
			{fmt.Sprintf("/api/v1/quarantine/%d/release", below), ""},
			{fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict), `{"reason": "noise"}`},
		} {
			r := f.post(req.path, req.body, viewer...)
			r.want(t, http.StatusForbidden, nil)
			if !strings.Contains(string(r.body), "role viewer may not release or discard") {
				t.Fatalf("403 body %s does not say the role is not allowed", r.body)
			}
		}
		if ids := openIDs(t, f); len(ids) != 3 {
			t.Fatalf("a refused write resolved something: %v open", ids)
		}
	})
	t.Run("no token or an unknown one is 401", func(t *testing.T) {
		f := newFixture(t, Config{Tokens: namedTokens})
		below, _, _ := f.hold()
		for _, auth := range []string{"", "Bearer nobody", "Bearer 0perator3", "Basic 0perator"} {
			f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), "", "Authorization", auth).want(t, http.StatusUnauthorized, nil)
		}
	})
	t.Run("an operator releases and discards, and the audit names them", func(t *testing.T) {
		f := newFixture(t, Config{Tokens: namedTokens})
		below, conflict, _ := f.hold()
		var rel, dis resolution
		f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), "", operator...).want(t, http.StatusOK, &rel)
		f.post(fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict), `{"reason": "noise"}`,
			"Authorization", "Bearer 0perator2").want(t, http.StatusOK, &dis)
		if rel.Operator != "j.doe" || dis.Operator != "a.smith" {
			t.Fatalf("resolutions name %q and %q", rel.Operator, dis.Operator)
		}
		var page auditPage
		f.get("/api/v1/audit").want(t, http.StatusOK, &page)
		by := map[uint64]string{}
		for _, r := range page.Records {
			by[r.Position] = r.Operator
		}
		if by[rel.Position] != "j.doe" || by[dis.Position] != "a.smith" || by[below] != "" {
			t.Fatalf("audit operators by position: %v", by)
		}
		raw := f.get("/api/v1/audit?outcome=discarded")
		if !strings.Contains(string(raw.body), `"operator": "a.smith"`) {
			t.Fatalf("the audit API does not show the operator: %s", raw.body)
		}
	})
	t.Run("with auth_reads a viewer and an operator may read", func(t *testing.T) {
		f := newFixture(t, Config{Tokens: namedTokens, AuthReads: true})
		for _, p := range []string{"/api/v1/state", "/api/v1/audit", "/api/v1/quarantine", "/metrics"} {
			f.get(p).want(t, http.StatusUnauthorized, nil)
			f.get(p, viewer...).want(t, http.StatusOK, nil)
			f.get(p, operator...).want(t, http.StatusOK, nil)
		}
	})
	t.Run("the single token is one operator named operator", func(t *testing.T) {
		f := newFixture(t, Config{Token: "s3cret"})
		below, _, _ := f.hold()
		var rel resolution
		f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), "", "Authorization", "Bearer s3cret").want(t, http.StatusOK, &rel)
		if rel.Operator != "operator" {
			t.Fatalf("released by %q", rel.Operator)
		}
	})
	t.Run("operator names never become metric labels", func(t *testing.T) {
		f := newFixture(t, Config{Tokens: namedTokens})
		below, _, _ := f.hold()
		f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), "", operator...).want(t, http.StatusOK, nil)
		body := string(f.get("/metrics").body)
		if strings.Contains(body, "j.doe") || strings.Contains(body, "watch desk") {
			t.Fatalf("a token name shows in /metrics:\n%s", body)
		}
	})
}

func TestTokensConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"both forms", Config{Token: "x", Tokens: namedTokens}, "not both"},
		{"a nameless token", Config{Tokens: []NamedToken{{Secret: "x", Role: RoleViewer}}}, "no name"},
		{"a name used twice", Config{Tokens: []NamedToken{{Name: "a", Secret: "x", Role: RoleViewer}, {Name: "a", Secret: "y", Role: RoleViewer}}}, `"a" is used twice`},
		{"an unknown role", Config{Tokens: []NamedToken{{Name: "a", Secret: "x", Role: "admin"}}}, `role "admin"`},
		{"an empty secret", Config{Tokens: []NamedToken{{Name: "a", Role: RoleOperator}}}, `token "a" is empty`},
		{"a shared secret", Config{Tokens: []NamedToken{{Name: "a", Secret: "Sh4red", Role: RoleViewer}, {Name: "b", Secret: "Sh4red", Role: RoleOperator}}}, `tokens "a" and "b" have the same secret`},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			c.cfg.setDefaults()
			err := c.cfg.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "Sh4red") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

func openIDs(t *testing.T, f *fixture) []uint64 {
	t.Helper()
	var ids []uint64
	f.store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error { ids = append(ids, q.ID); return nil })
	return ids
}

// Without tokens (open writes on loopback) a release or discard is audited
// as the operator its body names, as the CLI names the OS user.
func TestOpenWritesNameTheOperatorTheBodyGives(t *testing.T) {
	f := newFixture(t, Config{Listen: "127.0.0.1:0"})
	below, conflict, other := f.hold()
	var rel, dis resolution
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), `{"operator": " duty officer "}`).want(t, http.StatusOK, &rel)
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict), `{"reason": "noise", "operator": "j.doe"}`).want(t, http.StatusOK, &dis)
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/discard", other), `{"reason": "noise", "operator": "a\nb"}`).want(t, http.StatusBadRequest, nil)
	var page auditPage
	f.get("/api/v1/audit").want(t, http.StatusOK, &page)
	by := map[uint64]string{}
	for _, r := range page.Records {
		by[r.Position] = r.Operator
	}
	if rel.Operator != "duty officer" || dis.Operator != "j.doe" || by[rel.Position] != "duty officer" || by[dis.Position] != "j.doe" {
		t.Fatalf("resolutions name %q and %q; audit operators by position: %v", rel.Operator, dis.Operator, by)
	}
}

// TestATokenHolderCannotWriteAsSomeoneElse: with tokens the token names
// the operator. A body naming someone else is refused with 403 saying so,
// nothing resolved, rather than audited under the token's name while the
// caller believes it named another (the CLI refuses --operator beside a
// token for the same reason); a body naming the token's own holder, or
// nobody, goes through.
func TestATokenHolderCannotWriteAsSomeoneElse(t *testing.T) {
	f := newFixture(t, Config{Tokens: namedTokens})
	below, conflict, _ := f.hold()
	auth := []string{"Authorization", "Bearer 0perator"} // j.doe's
	for _, req := range []struct{ path, body string }{
		{fmt.Sprintf("/api/v1/quarantine/%d/release", below), `{"operator": "someone else"}`},
		{fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict), `{"reason": "noise", "operator": "a.smith"}`},
	} {
		r := f.post(req.path, req.body, auth...)
		r.want(t, http.StatusForbidden, nil)
		if !strings.Contains(string(r.body), `the token names the operator, j.doe`) {
			t.Fatalf("%s: 403 body %s does not say the token names the operator", req.path, r.body)
		}
	}
	if ids := openIDs(t, f); len(ids) != 3 {
		t.Fatalf("a refused write resolved something: %v open", ids)
	}
	var rel, dis resolution
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/release", below), `{"operator": " j.doe "}`, auth...).want(t, http.StatusOK, &rel)
	f.post(fmt.Sprintf("/api/v1/quarantine/%d/discard", conflict), `{"reason": "noise"}`, auth...).want(t, http.StatusOK, &dis)
	if rel.Operator != "j.doe" || dis.Operator != "j.doe" {
		t.Fatalf("the token's own writes name %q and %q, want j.doe", rel.Operator, dis.Operator)
	}
}
