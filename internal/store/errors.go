package store

import (
	"context"
	"errors"
	"fmt"
)

// Wrap is how an implementation's error leaves it, once: err wrapped in a
// message made of format and args after "driver: ", with sentinel (the
// contract's meaning of err, nil for none) in between. Context errors get
// no sentinel, and an error that carries its sentinel already gets no
// second. Both stay reachable with errors.Is and errors.As.
func Wrap(driver string, sentinel, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if sentinel != nil && !errors.Is(err, sentinel) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: %w: %w", driver, msg, sentinel, err)
	}
	return fmt.Errorf("%s: %s: %w", driver, msg, err)
}
