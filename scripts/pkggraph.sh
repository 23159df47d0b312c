#!/usr/bin/env bash
# Draws fusescope's package graph (its own packages and the imports between
# them, from go list) as Graphviz dot, or as SVG with -svg. Usage:
#   scripts/pkggraph.sh [-svg] [DIR]   (DIR: a checkout; default .)
# make graph writes docs/packages.svg.
set -euo pipefail
svg=0
if [[ ${1:-} == -svg ]]; then svg=1; shift; fi
dir=${1:-.}
mod=$(cd "$dir" && go list -m)
dotsrc=$(cd "$dir" && go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./cmd/... ./internal/... |
  awk -v mod="$mod/" '
    BEGIN { print "digraph packages {"; print "  rankdir=TB; node [shape=box, fontname=\"Helvetica\", fontsize=11]; edge [color=\"#555555\"];" }
    {
      from = $1; sub(mod, "", from)
      printf "  \"%s\";\n", from
      for (i = 2; i <= NF; i++) if (index($i, mod) == 1) { to = $i; sub(mod, "", to); printf "  \"%s\" -> \"%s\";\n", from, to }
    }
    END { print "}" }')
if [[ $svg == 1 ]]; then
  dot -Tsvg <<<"$dotsrc"
else
  echo "$dotsrc"
fi
