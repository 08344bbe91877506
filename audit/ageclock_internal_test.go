package audit

import (
	"testing"
	"time"
)

func TestAgeMarksSayHowFarBehindEachRecordWasStamped(t *testing.T) {
	var m ageMarks
	m = m.note(100, 0)
	m = m.note(150, 0)          // the same: one mark
	m = m.note(150, -time.Hour) // no record since: nothing marked
	m = m.note(200, -time.Hour)
	m = m.note(300, -2*time.Hour)
	for _, c := range []struct {
		pos  uint64
		want time.Duration
	}{{1, 0}, {150, 0}, {151, -time.Hour}, {200, -time.Hour}, {201, -2 * time.Hour}, {300, -2 * time.Hour}, {301, -2 * time.Hour}} {
		if got := m.behind(c.pos); got != c.want {
			t.Errorf("behind(%d) = %v, want %v (marks %v)", c.pos, got, c.want, m)
		}
	}
	if got := m.since(150); len(got) != 2 || got[0].upto != 200 {
		t.Errorf("since(150) = %v, want the marks up to 200 and 300", got)
	}
	if got := m.note(120, -3*time.Hour); len(got) != 1 || got.behind(1) != -3*time.Hour {
		t.Errorf("a chain gone back to 120: marks %v, want one, of -3h", got)
	}
}

func TestAnAgeClockRunsOnTheElapsedTimeAndSaysHowFarTheWallClockReadBehind(t *testing.T) {
	wall, el := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Duration(0)
	c := NewAgeClock(func() time.Time { return wall }, func() time.Duration { return el })
	start := wall
	for _, step := range []struct {
		wall, el time.Duration // moved by
		want     time.Duration // the clock, after start
		behind   time.Duration
	}{
		{0, 0, 0, 0},
		{time.Minute, time.Minute, time.Minute, 0},
		{3 * time.Hour, time.Minute, 2 * time.Minute, 0},                             // a step forward
		{-5 * time.Hour, time.Minute, 3 * time.Minute, -2*time.Hour - 2*time.Minute}, // a step back, past the start
		{2 * time.Hour, time.Minute, 4 * time.Minute, -2*time.Hour - 2*time.Minute},  // undone: the most stays
	} {
		wall, el = wall.Add(step.wall), el+step.el
		got, behind := c.Read()
		if !got.Equal(start.Add(step.want)) || behind != step.behind {
			t.Fatalf("wall %v, elapsed %v: read %v, %v behind; want %v, %v", wall, el, got, behind, start.Add(step.want), step.behind)
		}
	}
}
