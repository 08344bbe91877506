package demo

import "errors"

// Errors Run returns, wrapped with the details.
var (
	// ErrOptions: an option cannot be used (an unknown story, a dashboard
	// address that is not loopback, a negative duration).
	ErrOptions = errors.New("demo: invalid options")
	// ErrStalled: a step of the story did not happen in time: a consumer
	// did not connect, a message was not delivered.
	ErrStalled = errors.New("demo: the story stalled")
	// ErrNoReplay: the naive consumer's picture came out right, so the
	// standby replayed nothing it had applied and the failover proved
	// nothing.
	ErrNoReplay = errors.New("demo: no replay happened")
	// ErrWrongPicture: replayguard's picture differs from the truth: what
	// the field devices reported, what the meter registered.
	ErrWrongPicture = errors.New("demo: replayguard's picture is wrong")
	// ErrAudit: replayguard's audit chain did not verify at the end.
	ErrAudit = errors.New("demo: replayguard's audit chain does not verify")
	// ErrWrongClean: the dispatch board's picture, built from replayguard's
	// clean stream keyed on replayguard-key, differs from what the field
	// devices reported, or its keys are not the reports replayguard applied.
	ErrWrongClean = errors.New("demo: the clean stream's picture is wrong")
	// ErrOnePath: in a story on two paths, replayguard's audit records do
	// not name both feeds, so it did not consume both paths.
	ErrOnePath = errors.New("demo: replayguard did not consume both paths")
)
