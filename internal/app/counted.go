package app

import "fmt"

// integer is the counts counted takes.
type integer interface {
	~int | ~int64 | ~uint64
}

// counted is n followed by its noun, singular for one: "1 record",
// "2 records".
func counted[N integer](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// plural is one when n is 1, many otherwise.
func plural[N integer](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
