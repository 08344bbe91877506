package app

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

// groupMeterMember opens member on g with the meter route that adds kwh to
// meter/{topic[1]}; retention, when given, is the audit section's.
func groupMeterMember(t *testing.T, g *memory.Group, member, retention string) *App {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: postgres, url: 'postgres://db/rg', member: %s}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects: [{entity: "meter/{topic[1]}", add: {kwh: kwh}}]
%s`, member, retention), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := g.Open(member)
	if err != nil {
		t.Fatal(err)
	}
	a, err := openOn(t.Context(), cfg, cfg.Store, h, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func meterReading(id string) engine.Message {
	return engine.Message{Topic: "plant/main/energy", Payload: fmt.Appendf(nil, `{"msgId":"%s","kwh":0.25}`, id)}
}

// TestALineageMissingAWhollyArchivedChainIsAnError: on a shared store,
// retention moved every record of member m2's chain into the archive (its
// max_age passed). Read without the archive, m2's chain has no record in
// the store at all: the lineage must say the archived positions are
// missing, never leave m2's changes out and show m1's alone.
func TestALineageMissingAWhollyArchivedChainIsAnError(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	g := memory.NewGroup(0, 0)
	m1 := groupMeterMember(t, g, "m1", "")
	m2 := groupMeterMember(t, g, "m2", fmt.Sprintf("audit:\n  retention: {max_age: 1ms}\n  archive: %s\n", archive))
	if _, err := m2.Engine.Process(t.Context(), []engine.Message{meterReading("a"), meterReading("b"), meterReading("c")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	c, err := m2.chainWork()
	if err != nil || c == nil {
		t.Fatalf("chainWork: %v, %v", c, err)
	}
	if err := (&Tool{Config: m2.Config}).finishChains(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Engine.Process(t.Context(), []engine.Message{meterReading("d")}); err != nil {
		t.Fatal(err)
	}
	ro, _ := g.Open("")
	if bases, err := trimmedChains(t.Context(), ro); err != nil || bases["m2"].Position != 3 {
		t.Fatalf("retention trimmed %v, %v; want m2's chain trimmed to its head, 3", bases, err)
	}
	ls, err := StoreLineages(t.Context(), ro, archive, report.LineageOptions{Entities: []string{"meter/main"}})
	if err != nil || len(ls[0].Changes) != 4 || string(ls[0].State["kwh"]) != "1" {
		t.Fatalf("with the archive: %v; want 4 changes, kwh 1", err)
	}
	ls, err = StoreLineages(t.Context(), ro, "", report.LineageOptions{Entities: []string{"meter/main"}})
	if err == nil {
		t.Fatalf("without the archive: %d changes, kwh %s, no error; want an error naming m2's positions 1..3", len(ls[0].Changes), ls[0].State["kwh"])
	}
	if !strings.Contains(err.Error(), `"m2"`) || !strings.Contains(err.Error(), "1..3") {
		t.Fatalf("without the archive: %v; want m2's positions 1..3 named", err)
	}
}
