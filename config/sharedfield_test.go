package config

import "testing"

func TestAFieldOfOneEntityTakesOneOperation(t *testing.T) {
	r := "routes[0] (r)"
	incidents := route("name: r", "topic: inc/#", "source: [agency]", "sequence: seq")
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"add and set of one field in two effects of one entity are refused",
			incidents + effects("{entity: 'incident/{id}', add: {casualties: x}}", "{entity: 'incident/{id}', set: {casualties: y}}"),
			[]string{r + `.effects[1].set.casualties: field "casualties" of entity "incident/{id}" is also written by effects[0].add.casualties: ` +
				`both would write one value for each message, and one would undo or lose to the other; write the field in one effect, or name another field`}},
		{"two sets of one field are refused",
			incidents + effects("{entity: u, set: {status: a}}", "{entity: u, set: {status: b}}"),
			[]string{r + `.effects[1].set.status: field "status" of entity "u" is also written by effects[0].set.status: ` +
				`both would write one value for each message, and one would undo or lose to the other; write the field in one effect, or name another field`}},
		{"add and set of one field in one effect are refused once",
			incidents + effects("{entity: 'incident/{id}', add: {casualties: x}, set: {casualties: y}}"),
			[]string{r + `.effects[0].set.casualties: field "casualties" is already set by add in this effect: a field takes one operation`}},
		{"the same add twice is valid: both apply",
			incidents + effects("{entity: m, add: {kwh: a}}", "{entity: m, add: {kwh: b}}"), nil},
		{"one field of two entity templates is valid",
			incidents + effects("{entity: 'incident/{id}', add: {casualties: x}}", "{entity: 'unit/{unit}', set: {casualties: y}}"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, tc.file, tc.want...) })
	}
}
