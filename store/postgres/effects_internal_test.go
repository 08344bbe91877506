package postgres

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

func TestRefusalRoundsAreBounded(t *testing.T) {
	k := func(b byte) engine.Hash { return engine.Hash{b} }
	refuse := func(keys ...byte) refusedError {
		re := refusedError{engine.SQLRefusals{}}
		for _, b := range keys {
			re.keys[k(b)] = "sql effects[0]: SQLSTATE 23505: duplicate key"
		}
		return re
	}
	refused, err := refuse(1).merge(nil, 2)
	if err != nil || len(refused) != 1 {
		t.Fatalf("the first refusal: %v, %v", refused, err)
	}
	if _, err := refuse(1).merge(refused, 2); err == nil || !strings.Contains(err.Error(), "refused again") {
		t.Fatalf("a key refused twice = %v, want an error, not another round", err)
	}
	if refused, err = refuse(1, 2).merge(refused, 2); err != nil || len(refused) != 2 {
		t.Fatalf("a round adding a key: %v, %v", refused, err)
	}
	if _, err := refuse(3).merge(refused, 2); err == nil || !strings.Contains(err.Error(), "3 keys refused in a batch of 2") {
		t.Fatalf("more keys refused than the batch has = %v", err)
	}
}
