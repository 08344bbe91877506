package arch

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/replayguard/replayguard/"

// allowed lists, for each package, the project packages it may depend on
// (directly or not).
var allowed = map[string][]string{
	"engine":                              {},
	"config":                              {},
	"internal/sqltext":                    {},
	"internal/sptopic":                    {},
	"audit":                               {"engine"},
	"audit/sink":                          {"engine", "internal/httpretry"},
	"store/memory":                        {"engine"},
	"store/embedded":                      {"engine"},
	"store/storetest":                     {"engine"},
	"store/internal/shared":               {"engine"},
	"source/file":                         {"engine"},
	"source":                              {},
	"source/internal/consume":             {"engine", "source"},
	"source/internal/consume/consumetest": {"engine", "source"},
	"source/mqtt":                         {"engine", "source", "source/internal/consume", "internal/mqttconn"},
	"source/jetstream":                    {"engine", "source", "source/internal/consume"},
	"source/mqtt3":                        {"engine", "source", "source/internal/consume", "internal/mqttconn"},
	"internal/mqttprobe":                  {"internal/mqttconn"},
	"internal/mqttconn":                   {},
	"forward":                             {"engine", "internal/mqttconn", "internal/httpretry"},
	"internal/httpretry":                  {},
	"sparkplug":                           {"engine", "sparkplug/sparkplugpb"},
	"sparkplug/sparkplugpb":               {},
	"internal/testbroker":                 {},
	"internal/benchfeed":                  {},
	"metrics":                             {"engine", "source"},
	"web":                                 {"engine"},
	"internal/report":                     {"engine", "audit"},
	// internal/app wires everything below it; nothing above it (cmd,
	// internal/demo, the test and bench harnesses).
	"internal/app": appDeps,
	// cmd/replayguard reaches the components only through internal/app
	// (and internal/demo, which is built on it): see direct below.
	"cmd/replayguard": append([]string{"internal/app", "internal/demo"}, appDeps...),
}

// leaves are packages of a few functions that import no project package
// and that any package may use, the engine and the configuration alike.
var leaves = []string{"internal/sqltext", "internal/sptopic"}

// appDeps are the project packages internal/app depends on, directly or
// not.
var appDeps = []string{
	"config", "engine", "audit", "audit/sink", "journal", "forward", "metrics", "web",
	"sparkplug", "sparkplug/sparkplugpb",
	"store/memory", "store/embedded", "store/postgres", "store/redis", "store/internal/shared",
	"source", "source/file", "source/mqtt", "source/mqtt3", "source/jetstream", "source/internal/consume",
	"internal/mqttconn", "internal/mqttprobe", "internal/report", "internal/benchfeed", "internal/httpretry",
}

// direct lists, for a package whose transitive dependencies include
// everything, the project packages it may import itself.
var direct = map[string][]string{
	// flags, configuration, signals and exit codes; the work is internal/app's.
	"cmd/replayguard": {"config", "internal/app", "internal/demo"},
}

func TestImportsPointTowardTheEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Deps", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		want, checked := allowed[name]
		if !checked {
			continue
		}
		seen++
		for _, d := range p.Deps {
			dep, ok := strings.CutPrefix(d, module)
			if !ok {
				continue
			}
			if !contains(want, dep) && !contains(leaves, dep) {
				t.Errorf("%s depends on %s: only %v allowed", name, dep, want)
			}
		}
	}
	if seen != len(allowed) {
		t.Fatalf("checked %d packages, want %d: a package was renamed", seen, len(allowed))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCommandsImportOnlyTheAppLayer(t *testing.T) {
	for name, want := range direct {
		out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", "../../"+name).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", name, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			dep, ok := strings.CutPrefix(imp, module)
			if ok && !contains(want, dep) {
				t.Errorf("%s imports %s: only %v allowed; move the work into internal/app", name, dep, want)
			}
		}
	}
}
