package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/web"
)

func TestHTTPTokens(t *testing.T) {
	t.Setenv("RG_TEST_VIEWER", "v13wer")
	t.Setenv("RG_TEST_SAME", "Sh4red-secret")
	t.Setenv("RG_TEST_EMPTY", "")
	file := filepath.Join(t.TempDir(), "jdoe")
	os.WriteFile(file, []byte("Sh4red-secret\n"), 0o600)
	t.Run("each entry's secret is read with its name and role", func(t *testing.T) {
		got, err := HTTPTokens(config.HTTPConfig{Tokens: []config.TokenConfig{
			{Name: "desk", TokenEnv: "RG_TEST_VIEWER", Role: "viewer"}, {Name: "j.doe", TokenFile: file, Role: "operator"}}})
		want := []web.NamedToken{{Name: "desk", Secret: "v13wer", Role: web.RoleViewer}, {Name: "j.doe", Secret: "Sh4red-secret", Role: web.RoleOperator}}
		if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("the single token is an operator named operator", func(t *testing.T) {
		got, err := HTTPTokens(config.HTTPConfig{TokenEnv: "RG_TEST_VIEWER"})
		if err != nil || len(got) != 1 || got[0] != (web.NamedToken{Name: "operator", Secret: "v13wer", Role: web.RoleOperator}) {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("two entries with one secret are refused, naming both and not the secret", func(t *testing.T) {
		_, err := HTTPTokens(config.HTTPConfig{Tokens: []config.TokenConfig{
			{Name: "desk", TokenEnv: "RG_TEST_VIEWER", Role: "viewer"}, {Name: "a.smith", TokenEnv: "RG_TEST_SAME", Role: "viewer"},
			{Name: "j.doe", TokenFile: file, Role: "operator"}}})
		if err == nil || !strings.Contains(err.Error(), "http.tokens[1] (a.smith) and http.tokens[2] (j.doe) hold the same token") ||
			strings.Contains(err.Error(), "Sh4red") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a secret with white space around it is refused: a request's token never has it", func(t *testing.T) {
		padded := filepath.Join(t.TempDir(), "padded")
		os.WriteFile(padded, []byte("Sh4red-secret \n"), 0o600)
		_, err := HTTPTokens(config.HTTPConfig{Tokens: []config.TokenConfig{{Name: "desk", TokenFile: padded, Role: "viewer"}}})
		if err == nil || !strings.Contains(err.Error(), "http.tokens[0] (desk): the token has white space") || strings.Contains(err.Error(), "Sh4red") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("an empty secret is refused", func(t *testing.T) {
		_, err := HTTPTokens(config.HTTPConfig{Tokens: []config.TokenConfig{{Name: "desk", TokenEnv: "RG_TEST_EMPTY", Role: "viewer"}}})
		if err == nil || !strings.Contains(err.Error(), "http.tokens[0] (desk): the token is empty") {
			t.Fatalf("got %v", err)
		}
	})
}
