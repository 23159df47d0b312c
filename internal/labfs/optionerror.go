package labfs

import (
	"strings"

	"github.com/fusescope/fusescope/internal/option"
)

// optionErr is a problem with the lab fs's options, an *option.Error: it
// names each option by its name in Config's flag tags ({latency},
// {keep-cache}) and never as a front end spells it (fs mount words them as
// --latency; a front end with other names for them, as its own). format is
// the rest of the sentence after the option at fault; another option it
// names is in braces: "and {direct-io} contradict each other: choose one".
func optionErr(opt, format string, args ...any) error {
	sep := " "
	if strings.HasPrefix(format, ":") {
		sep = ""
	}
	return option.Errorf("{"+opt+"}"+sep+format, args...)
}
