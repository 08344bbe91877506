// Package deploy_test checks the operations kit beside the metrics: the
// Prometheus alerting rules (prometheus/alerts.yml), their unit tests
// (prometheus/alerts_test.yml) and the Grafana dashboard
// (grafana/replayguard.json) name only metrics and labels the code
// exports, and promtool accepts the rules and passes their tests.
package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"go.uber.org/goleak"
	"gopkg.in/yaml.v3"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	alertsFile     = "prometheus/alerts.yml"
	alertTestsFile = "prometheus/alerts_test.yml"
	dashboardFile  = "grafana/replayguard.json"
)

// targetLabels are what the scrape adds to every series.
var targetLabels = []string{"instance", "job"}

var (
	metricName = regexp.MustCompile(`replayguard_[a-z_]+`)
	selector   = regexp.MustCompile(`(replayguard_[a-z_]+)\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping   = regexp.MustCompile(`\b(?:by|on)\s*\(([^)]*)\)`)
	labelRef   = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	labelName  = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*`)
)

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func TestKitNamesOnlyExportedMetrics(t *testing.T) {
	exp := exported(t)
	tests := readYAML[ruleTests](t, alertTestsFile)
	files := []string{alertsFile, alertTestsFile, dashboardFile}
	for _, f := range tests.RuleFiles {
		if f = filepath.Join(filepath.Dir(alertTestsFile), f); !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	for _, f := range files {
		text := read(t, f)
		names := metricName.FindAllString(text, -1)
		if len(names) == 0 {
			t.Errorf("%s names no replayguard_ metric", f)
		}
		for _, n := range names {
			if _, ok := exp[n]; !ok {
				t.Errorf("%s: %s is not a metric replayguard exports", f, n)
			}
		}
		checkSelectors(t, f, text, exp)
	}
}

// checkSelectors fails on a label matched or grouped by that the metric
// (or the scrape) does not carry.
func checkSelectors(t *testing.T, file, text string, exp map[string][]string) {
	t.Helper()
	for _, s := range selector.FindAllStringSubmatch(text, -1) {
		have := append(slices.Clone(exp[s[1]]), targetLabels...)
		for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
			if !slices.Contains(have, m[1]) {
				t.Errorf("%s: %s has no label %q (it has %v)", file, s[1], m[1], have)
			}
		}
	}
	known := append(slices.Clone(targetLabels), "le")
	for _, labels := range exp {
		known = append(known, labels...)
	}
	for _, g := range grouping.FindAllStringSubmatch(text, -1) {
		for _, l := range labelName.FindAllString(g[1], -1) {
			if !slices.Contains(known, l) {
				t.Errorf("%s: no replayguard metric has the label %q it groups by", file, l)
			}
		}
	}
}

func TestEveryAlertSaysWhatToLookAt(t *testing.T) {
	exp := exported(t)
	rules := alerts(t)
	if len(rules) == 0 {
		t.Fatalf("%s holds no alert", alertsFile)
	}
	for _, r := range rules {
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: a summary and a description are both required", r.Alert)
		}
		have := slices.Clone(targetLabels)
		for _, n := range metricName.FindAllString(r.Expr, -1) {
			have = append(have, exp[n]...)
		}
		for _, a := range r.Annotations {
			for _, ref := range labelRef.FindAllStringSubmatch(a, -1) {
				if !slices.Contains(have, ref[1]) {
					t.Errorf("%s: its annotations read $labels.%s, which %q does not carry", r.Alert, ref[1], r.Expr)
				}
			}
		}
	}
}

func TestEveryAlertIsTestedBothWays(t *testing.T) {
	exp := exported(t)
	tests := readYAML[ruleTests](t, alertTestsFile)
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(alertsFile)}) {
		t.Errorf("%s tests %v, want %s", alertTestsFile, tests.RuleFiles, filepath.Base(alertsFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
		for _, in := range tc.InputSeries {
			checkSeriesLabels(t, tc.Name, in.Series, exp)
		}
	}
	for _, r := range alerts(t) {
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("%s: tested firing %v, tested quiet %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
		}
	}
}

// checkSeriesLabels fails on an input series whose labels are not exactly
// those of a scraped series of its metric: the expressions' vector
// matching is tested on what Prometheus will hold.
func checkSeriesLabels(t *testing.T, test, series string, exp map[string][]string) {
	t.Helper()
	s := selector.FindStringSubmatch(series)
	if s == nil {
		t.Errorf("%s: input series %q is not name{labels}", test, series)
		return
	}
	var got []string
	for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
		got = append(got, m[1])
	}
	want := append(slices.Clone(exp[s[1]]), targetLabels...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: input series %s has labels %v, a scraped one %v", test, s[1], got, want)
	}
}

func TestPromtoolAcceptsTheRulesAndPassesTheirTests(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", alertTestsFile}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

func TestTheDashboardReadsItsDatasourceAndInstance(t *testing.T) {
	var d struct {
		SchemaVersion int `json:"schemaVersion"`
		Templating    struct {
			List []struct{ Name string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr       string `json:"expr"`
				Datasource struct{ UID string }
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(read(t, dashboardFile)), &d); err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Equal(vars, []string{"datasource", "instance"}) || d.SchemaVersion < 39 {
		t.Errorf("variables %v, schemaVersion %d; want [datasource instance] and 39 or later", vars, d.SchemaVersion)
	}
	instance := regexp.MustCompile(`replayguard_[a-z_]+\{[^}]*instance=~"\$instance"`)
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Datasource.UID != "${datasource}" || len(metricName.FindAllString(q.Expr, -1)) != len(instance.FindAllString(q.Expr, -1)) {
				t.Errorf("panel %q: %q must read ${datasource} and select $instance on every metric", p.Title, q.Expr)
			}
		}
	}
}

// promtool returns the promtool binary (Debian's prometheus package). When
// there is none it skips the test, or fails it when
// REPLAYGUARD_REQUIRE_SERVICES=1.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("REPLAYGUARD_REQUIRE_SERVICES") == "1" {
		t.Fatal("promtool is not installed (apt-get install prometheus) and REPLAYGUARD_REQUIRE_SERVICES=1")
	}
	t.Skip("promtool is not installed; apt-get install prometheus to check the alerting rules")
	return ""
}

func alerts(t *testing.T) []rule {
	t.Helper()
	f := readYAML[ruleFile](t, alertsFile)
	if len(f.Groups) != 1 || f.Groups[0].Name != "replayguard" {
		t.Fatalf("%s: want one group named replayguard", alertsFile)
	}
	return f.Groups[0].Rules
}

func readYAML[T any](t *testing.T, name string) T {
	t.Helper()
	var v T
	if err := yaml.Unmarshal([]byte(read(t, name)), &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
