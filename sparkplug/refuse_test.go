package sparkplug_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

func TestASparkplugRouteIsRefused(t *testing.T) {
	g := memory.NewGroup(time.Hour, 100)
	m, err := g.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cases := []struct {
		name  string
		store engine.Store
		opts  engine.Options
		want  string
	}{
		{"without its route kind", m, engine.Options{Routes: []engine.Route{plantRoute}}, `kind "sparkplug" is not json`},
		{"when it names a source", memory.New(), engine.Options{Routes: []engine.Route{{Name: "p", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
			Source: []string{"a"}}}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}}, "sets no source, sequence, epoch or id: they are implied"},
		{"outside the namespace", memory.New(), engine.Options{Routes: []engine.Route{{Name: "p", Kind: sparkplug.KindSparkplug, Topic: "plant/#"}},
			Kinds: []engine.RouteKind{sparkplug.RouteKind{}}}, "is under spBv1.0/"},
		{"when it reads a json path", memory.New(), engine.Options{Routes: []engine.Route{{Name: "p", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
			Effects: []engine.EffectSpec{{Entity: "m", Set: map[string]string{"k": "kwh"}}}}}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}}, "reads metrics.<Name>, timestamp.<Name>, is_historical.<Name>, timestamp, seq or topic[N]"},
		{"when its topic names the host applications' NCMD", memory.New(), engine.Options{Routes: []engine.Route{{Name: "p", Kind: sparkplug.KindSparkplug,
			Topic: "spBv1.0/plant/NCMD/#"}}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}},
			`topic "spBv1.0/plant/NCMD/#": message type "NCMD" is not one a sparkplug route decides (NBIRTH, NDATA, NDEATH, DBIRTH, DDATA, DDEATH; ` +
				`NCMD and DCMD are a host application's commands, not an edge's messages)`},
		{"when its topic names the host applications' DCMD", memory.New(), engine.Options{Routes: []engine.Route{{Name: "p", Kind: sparkplug.KindSparkplug,
			Topic: "spBv1.0/+/DCMD/line-1/+"}}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}},
			`message type "DCMD" is not one a sparkplug route decides`},
		{"when its topic is the host applications' STATE", memory.New(), engine.Options{Routes: []engine.Route{{Name: "p", Kind: sparkplug.KindSparkplug,
			Topic: "spBv1.0/STATE/#"}}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}},
			`topic "spBv1.0/STATE/#": spBv1.0/STATE/ holds the host applications' STATE messages, not an edge's`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := engine.New(context.Background(), c.store, c.opts)
			if err == nil {
				e.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, engine.ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrConfig saying %q", err, c.want)
			}
		})
	}
}
