package main

import (
	"errors"
	"flag"
)

func cmdRun(e *env) error {
	return errors.New("run: not wired yet")
}

func demoFlags(fs *flag.FlagSet) {}

func cmdDemo(e *env) error {
	return errors.New("demo: not wired yet")
}
