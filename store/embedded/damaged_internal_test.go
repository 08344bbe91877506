package embedded

import "testing"

// TestAPanicOutsideBoltIsNotTakenForADamagedFile: a panic raised by this
// program's own code inside a transaction is a defect, not a damaged file:
// it goes on as a panic, never telling an operator to restore the store
// from a backup.
func TestAPanicOutsideBoltIsNotTakenForADamagedFile(t *testing.T) {
	var err error
	defer func() {
		if r := recover(); r != "a defect of the caller" {
			t.Fatalf("recovered %v, error %v; want the panic to go on as it came", r, err)
		}
	}()
	func() {
		defer recoverDamaged("replayguard.db", &err, guard())
		panic("a defect of the caller")
	}()
	t.Fatalf("the panic was taken for a damaged file: %v", err)
}
