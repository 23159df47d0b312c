package report

import (
	"fmt"
	"time"
)

// EndNote ends the line that announces a run of reports every interval:
// with a count it ends by itself, and says when; without, Ctrl-C ends it.
func EndNote(interval time.Duration, count int) string {
	if count > 0 {
		return fmt.Sprintf("%s, ending in %s.", plural(count, "report", "reports"), time.Duration(count)*interval)
	}
	return "Hit Ctrl-C to end."
}
