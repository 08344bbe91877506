package main

import "fmt"

// counted is n followed by its noun, singular for one: "1 route",
// "2 routes".
func counted(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
