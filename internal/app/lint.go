package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/store/postgres"
)

// lintTimeout bounds how long CheckSQL waits for the database.
const lintTimeout = 10 * time.Second

// CheckSQL checks every sql effect's statement against the postgres
// store's server, preparing it without running it (see
// postgres.CheckStatements), and returns a problem for each statement the
// server refuses or whose parameters differ from its args, at
// routes[i].effects[j].sql. When the server cannot be reached, it returns
// no problem and skipped says why nothing was checked. A configuration
// without sql effects checks nothing and skips nothing.
func CheckSQL(ctx context.Context, cfg *config.Config) (problems []config.Problem, skipped error) {
	var stmts []postgres.Statement
	var paths []string
	for i, r := range cfg.Routes {
		for j, e := range r.Effects {
			if e.SQL != "" {
				stmts = append(stmts, postgres.Statement{SQL: e.SQL, Args: len(e.Args)})
				paths = append(paths, fmt.Sprintf("routes[%d].effects[%d].sql", i, j))
			}
		}
	}
	if len(stmts) == 0 || cfg.Store.Kind != config.StorePostgres {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lintTimeout)
	defer cancel()
	found, err := postgres.CheckStatements(ctx, cfg.Store.URL, stmts)
	if errors.Is(err, postgres.ErrUnreachable) {
		return nil, err
	}
	if err != nil {
		return []config.Problem{{Path: "store.url", Message: err.Error()}}, nil
	}
	for i, p := range found {
		if p != "" {
			problems = append(problems, config.Problem{Path: paths[i], Message: p})
		}
	}
	return problems, nil
}
