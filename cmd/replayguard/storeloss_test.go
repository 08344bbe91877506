package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAStoreThatLostAMembersCommits is what an operator sees and does when
// the group's store comes back without a member's last commits (a standby
// promoted before it had them, made here by taking them off the store by
// hand): `audit verify` reports the chain behind the member's journal,
// `store loss` with the journal recovers them, and without the journal
// (the member's disk lost too) the loss stays until `store accept-loss`
// names the operator.
func TestAStoreThatLostAMembersCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	cfgPath := storeConfig(t, fmt.Sprintf("{kind: postgres, url: %q}", pg.URL()))
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	member := cfg.MQTT.ClientID

	commitReadings(t, cfg, 1, 6) // as run does: the member with its journal
	loseLast(t, cfg, member, 2)
	out, errs, code := cli(t, "", "audit", "verify", "-c", cfgPath)
	if code != 1 || !strings.Contains(out, "BEHIND") || !strings.Contains(out, "positions 5..6 were committed, acknowledged and lost") {
		t.Fatalf("audit verify on a store behind the journal: exit %d\n%s%s", code, out, errs)
	}
	out = mustRun(t, "", "store", "loss", "-c", cfgPath)
	if !strings.Contains(out, "2 deliveries decided again from its journal") {
		t.Fatalf("store loss with the journal: %q", out)
	}
	if got := kwh(t, cfgPath); got != "1.5" {
		t.Fatalf("meter kWh after the recovery %s, want 1.5 (six readings of 0.25)", got)
	}
	mustRun(t, "", "audit", "verify", "-c", cfgPath)

	// The member's disk is replaced: its new journal begins at position 8
	// (after the 6 records, 2 decided again and the recovery record). The
	// store then loses positions 6..11: 8..11 are in the journal, 6..7 in
	// none.
	if err := os.RemoveAll(cfg.Store.Journal.Path); err != nil {
		t.Fatal(err)
	}
	commitReadings(t, cfg, 7, 10)
	loseLast(t, cfg, member, 6)
	out = mustRun(t, "", "store", "loss", "-c", cfgPath)
	if !strings.Contains(out, "positions 6..11 were acknowledged and lost; positions 6..7 cannot be recovered") || !strings.Contains(out, "accept-loss") {
		t.Fatalf("store loss beyond the journal: %q", out)
	}
	out = mustRun(t, "", "store", "accept-loss", "--operator", "duty officer", "-c", cfgPath)
	if !strings.Contains(out, "duty officer accepted the loss of positions 6..7") {
		t.Fatalf("store accept-loss: %q", out)
	}
	mustRun(t, "", "audit", "verify", "-c", cfgPath)
	if got := kwh(t, cfgPath); got != "2.5" {
		t.Fatalf("meter kWh after the acceptance %s, want 2.5 (ten readings of 0.25, none twice)", got)
	}
	export := mustRun(t, "", "audit", "export", "-c", cfgPath)
	if !strings.Contains(export, `"outcome":"loss_accepted"`) || !strings.Contains(export, `"operator":"duty officer"`) {
		t.Fatalf("the audit holds no acceptance naming the operator:\n%s", export)
	}
	if _, errs, code := cli(t, "", "store", "accept-loss", "--operator", "duty officer", "-c", cfgPath); code != 1 || !strings.Contains(errs, "no store loss to accept") {
		t.Fatalf("a second accept-loss: exit %d, %s", code, errs)
	}
}

// commitReadings decides meter readings from..to as cfg's run member, each pair in
// a batch of its own, with its journal.
func commitReadings(t *testing.T, cfg *config.Config, from, to int) {
	t.Helper()
	a, err := app.Open(context.Background(), cfg, app.Options{Member: app.RunMember(cfg), Journal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := from; i <= to; i += 2 {
		var msgs []engine.Message
		for j := i; j <= min(i+1, to); j++ {
			msgs = append(msgs, engine.Message{Topic: "plant/meter-3/energy", Payload: fmt.Appendf(nil, `{"msgId":"meter-3-%06d","kwh":0.25}`, j)})
		}
		if _, err := a.Engine.Process(context.Background(), msgs); err != nil {
			t.Fatal(err)
		}
	}
}

// loseLast takes the member's last n audit records off the store, as a
// standby promoted before it received them would lack them.
func loseLast(t *testing.T, cfg *config.Config, member string, n uint64) {
	t.Helper()
	ctx := context.Background()
	st, err := app.OpenStore(cfg.Store, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := st.(engine.ChainScanner)
	chains, err := cs.Chains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var head uint64
	for _, c := range chains {
		if c.Member == member {
			head = c.Head.Position
		}
	}
	keep := head - n
	base, err := engine.ChainRecord(ctx, cs, member, keep)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	s := cfg.Store.Schema
	for _, q := range []string{
		`DELETE FROM ` + s + `.audit WHERE member = (SELECT number FROM ` + s + `.members WHERE member = $1) AND position > $2`,
		`UPDATE ` + s + `.members SET head_position = $2, head_hash = $3 WHERE member = $1`,
	} {
		args := []any{member, int64(keep)}
		if strings.HasPrefix(q, "UPDATE") {
			args = append(args, base.Hash[:])
		}
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// kwh reads meter/meter-3's kWh from the store.
func kwh(t *testing.T, cfgPath string) string {
	t.Helper()
	out := mustRun(t, "", "state", "--json", "-c", cfgPath)
	i := strings.Index(out, `"meter/meter-3"`)
	if i < 0 {
		t.Fatalf("state has no meter/meter-3: %s", out)
	}
	rest := out[i:]
	j := strings.Index(rest, `"kwh": `)
	if j < 0 {
		t.Fatalf("state has no kwh for meter/meter-3: %s", out)
	}
	v := rest[j+len(`"kwh": `):]
	return strings.TrimSpace(v[:strings.IndexAny(v, ",}\n")])
}
