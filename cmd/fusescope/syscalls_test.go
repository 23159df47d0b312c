package main

import (
	"errors"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
)

func TestCommandStatus(t *testing.T) {
	zero, three := 0, 3
	for _, c := range []struct {
		live *profile.LiveInfo
		want int // 0: no error
	}{
		{nil, 0},
		{&profile.LiveInfo{PID: 42}, 0}, // -p: no status of its own
		{&profile.LiveInfo{ExitStatus: &zero}, 0},
		{&profile.LiveInfo{ExitStatus: &three}, 3},
		{&profile.LiveInfo{KilledBy: "SIGTERM"}, 128 + 15},
		{&profile.LiveInfo{KilledBy: "SIGNOTONE"}, 1},
	} {
		err := commandStatus(c.live)
		var ee *exitError
		switch {
		case c.want == 0 && err != nil:
			t.Errorf("%+v: %v, want no error", c.live, err)
		case c.want != 0 && (!errors.As(err, &ee) || ee.code != c.want || ee.msg != ""):
			t.Errorf("%+v: %#v, want a silent exit %d", c.live, err, c.want)
		}
	}
}
