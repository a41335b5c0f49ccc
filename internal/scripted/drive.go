package scripted

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/round"
)

// Resolve is the activity resolver of scripted workflows: every name
// resolves; "fail*" activities fail without retry, "flaky*" fail their
// first attempt, "missing*" are unknown; the rest return "ok:" + input.
func Resolve(name string) (round.ActivityFunc, bool) {
	if strings.HasPrefix(name, "missing") {
		return nil, false
	}
	return func(_ context.Context, l *provider.ActivityLease, _ *round.Heartbeat) ([]byte, error) {
		switch {
		case strings.HasPrefix(name, "fail"):
			return nil, permanent{fmt.Errorf("%s refused %q", name, l.Task.Input)}
		case strings.HasPrefix(name, "flaky") && l.Task.Attempt == 1:
			return nil, errors.New("flaky first attempt")
		}
		return append([]byte("ok:"), l.Task.Input...), nil
	}, true
}

type permanent struct{ error }

func (permanent) NonRetryable() bool { return true }

// Drain runs rounds and activity attempts until neither finds visible work,
// returning the first error that is not a failed round (which the runner
// retries by itself). It gives up after limit steps.
func Drain(ctx context.Context, r *round.Runner, w *round.ActivityWorker, limit int) error {
	for i := 0; i < limit; i++ {
		rep, err := r.RunOnce(ctx)
		if err != nil && !errors.Is(err, provider.ErrConflict) {
			return err
		}
		arep, aerr := w.RunOnce(ctx)
		if aerr != nil {
			return aerr
		}
		if rep == nil && arep == nil && err == nil {
			return nil
		}
	}
	return fmt.Errorf("scripted: work left after %d steps", limit)
}
