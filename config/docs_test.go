package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// Every setting the file takes is named in docs/configuration.md, whose
// table says where each is described: a key added to a section cannot be
// left out of the reference.
func TestTheConfigurationPageNamesEverySetting(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(page) {
				t.Errorf("docs/configuration.md does not name %s%s", path, name)
			}
			walk(path+name+".", f.Type)
		}
	}
	walk("", reflect.TypeFor[Config]())
}
