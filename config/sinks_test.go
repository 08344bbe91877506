package config

import "testing"

func TestSyslogMaxMessageDefaultsToWhatReceiversShouldTake(t *testing.T) {
	c, err := Parse([]byte("audit: {sinks: [{name: s, kind: syslog, address: 'h:514'}, {name: f, kind: file, path: /x}]}"), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Audit.Sinks[0].MaxMessage; got != 8<<10 {
		t.Fatalf("syslog max_message %v, want 8KiB", got)
	}
	if got := c.Audit.Sinks[1].MaxMessage; got != 0 {
		t.Fatalf("file sink max_message %v, want none", got)
	}
}
