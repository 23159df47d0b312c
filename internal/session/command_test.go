package session

import (
	"errors"
	"testing"
)

func TestExitErr(t *testing.T) {
	zero, three := 0, 3
	for _, c := range []struct {
		exit *Exit
		want int // 0: no error
	}{
		{nil, 0}, // no command, or one still running
		{&Exit{Status: &zero}, 0},
		{&Exit{Status: &three}, 3},
		{&Exit{KilledBy: "SIGTERM"}, 128 + 15},
		{&Exit{KilledBy: "SIGNOTONE"}, 1},
	} {
		err := c.exit.Err()
		var ee *ExitError
		switch {
		case c.want == 0 && err != nil:
			t.Errorf("%+v: %v, want no error", c.exit, err)
		case c.want != 0 && (!errors.As(err, &ee) || ee.Code != c.want || ee.Error() != ""):
			t.Errorf("%+v: %#v, want a silent exit %d", c.exit, err, c.want)
		}
	}
}
