package main

func cmdState(e *env) error { return e.tool().State(e.ctx, e.flagBool("json"), e.args...) }

func cmdSources(e *env) error { return e.tool().Sources(e.ctx, e.flagBool("json")) }
