package bench

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlError is a bench file's problem at a line, in the bench's words.
type yamlError struct {
	line int
	msg  string
}

func (e *yamlError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// checkYAML walks a bench file's document against the Spec before it is
// decoded, so that a key the bench does not know or a value of the wrong
// kind is said as the bench file's author would fix it: the line, the
// nearest key or the kind of value wanted (go-yaml's own text names Go
// types: "cannot unmarshal !!str `five` into int").
func checkYAML(doc *yaml.Node) error {
	n := doc
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "schema" {
				return &yamlError{n.Content[i].Line, "this is a fusescope record, not a bench file: give a bench file (YAML with configurations and workloads, docs/bench.md); diff, show and report read records"}
			}
		}
	}
	if n.Kind != yaml.MappingNode && n.ShortTag() != "!!null" {
		return &yamlError{n.Line, fmt.Sprintf("a bench file is a YAML mapping of keys (name, configurations, workloads...: docs/bench.md), not %s", describe(n))}
	}
	return checkNode(n, reflect.TypeFor[Spec](), "the bench", "", 0)
}

// maxDepth bounds the walk (aliases may nest deeply; a bench file does not).
const maxDepth = 64

// checkNode checks n against t. name says what n is in messages ("the
// bench", `configuration "lab"`, `workload "r"'s fio`); key is the key
// whose value it is (a list's items are named after it).
func checkNode(n *yaml.Node, t reflect.Type, name, key string, depth int) error {
	if depth > maxDepth {
		return &yamlError{n.Line, "nested too deeply for a bench file"}
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil
		}
		return checkNode(n.Alias, t, name, key, depth+1)
	}
	if n.ShortTag() == "!!null" {
		return nil // the zero value: the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func(want string) error {
		return &yamlError{n.Line, fmt.Sprintf("%s is %s, not %s", name, describe(n), want)}
	}
	if t == reflect.TypeFor[Duration]() {
		var d Duration
		if n.Kind != yaml.ScalarNode || d.UnmarshalYAML(n) != nil {
			return wrong("a duration: give one such as 90s or 10m")
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return wrong("a mapping of keys (key: value lines, or {key: value})")
		}
		if v := mappingValue(n, "name"); v != nil && v.Kind == yaml.ScalarNode && v.Value != "" {
			if noun, _, ok := strings.Cut(name, " #"); ok {
				name = fmt.Sprintf("%s %q", noun, v.Value)
			}
		}
		name = strings.Replace(name, " #", " ", 1)
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.ShortTag() == "!!merge" {
				if err := checkMerge(v, t, name, key, depth+1); err != nil {
					return err
				}
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				return unknownKey(k, name, fields)
			}
			child := k.Value
			if name != "the bench" {
				child = name + "'s " + k.Value
			}
			if err := checkNode(v, f.Type, child, k.Value, depth+1); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return wrong("a list (- item lines, or [a, b])")
		}
		for i, item := range n.Content {
			// "#" marks the number a name may replace (configuration #2).
			if err := checkNode(item, t.Elem(), fmt.Sprintf("%s #%d", itemNoun(key), i+1), key, depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return wrong("a mapping of options (key: value lines, or {key: value})")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], t.Elem(), name+" option "+n.Content[i].Value, key, depth+1); err != nil {
				return err
			}
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return wrong("a single value (quote it if it holds a colon or starts with [ or {)")
		}
	case reflect.Bool:
		// go-yaml takes YAML 1.1's yes, no, on and off for a bool too.
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" && !slices.Contains(yaml11Bools, n.Value) {
			return wrong("true or false")
		}
	case reflect.Int, reflect.Int64:
		if _, err := strconv.ParseInt(intText(n), 0, 64); n.ShortTag() != "!!int" || err != nil {
			return wrong("a whole number, such as 5")
		}
	case reflect.Uint64:
		if _, err := strconv.ParseUint(intText(n), 0, 64); n.ShortTag() != "!!int" || err != nil {
			return wrong("a whole number of 0 or more, such as 5")
		}
	case reflect.Float64:
		if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
			return wrong("a number, such as 0.5")
		}
	}
	return nil
}

var yaml11Bools = []string{"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "n", "N", "no", "No", "NO", "off", "Off", "OFF"}

// itemNoun names an item of the list under key.
func itemNoun(key string) string {
	switch key {
	case "configurations", "workloads":
		return strings.TrimSuffix(key, "s")
	case "published":
		return "published figure"
	}
	return key + " item"
}

// intText is an integer scalar as strconv reads it (YAML allows 1_000 and 0o17).
func intText(n *yaml.Node) string {
	s := strings.ReplaceAll(n.Value, "_", "")
	if rest, ok := strings.CutPrefix(s, "0o"); ok {
		s = "0" + rest
	}
	return s
}

// checkMerge checks the value of a merge key (<<: *anchor): one mapping or
// a list of them, merged into the mapping it is in.
func checkMerge(v *yaml.Node, t reflect.Type, name, key string, depth int) error {
	for v.Kind == yaml.AliasNode && v.Alias != nil && depth < maxDepth {
		v, depth = v.Alias, depth+1
	}
	if v.Kind == yaml.SequenceNode {
		for _, m := range v.Content {
			if err := checkMerge(m, t, name, key, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return checkNode(v, t, name, key, depth)
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// describe is a value as a message quotes it.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	return strconv.Quote(v)
}

// yamlFields are a struct's fields by their YAML key (a workload's kinds
// among them).
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = f
		}
	}
	if t == reflect.TypeFor[Workload]() {
		// A workload's kinds are keys of its own, each of its kind's type.
		for key, k := range kinds {
			fields[key] = reflect.StructField{Name: key, Type: reflect.TypeOf(k.make())}
		}
	}
	return fields
}

// unknownKey says which key was meant: the nearest by edit distance when
// one is close, else the keys there are.
func unknownKey(k *yaml.Node, name string, fields map[string]reflect.StructField) error {
	keys := make([]string, 0, len(fields))
	for name := range fields {
		keys = append(keys, name)
	}
	slices.Sort(keys)
	best, dist := "", len(k.Value)+1
	for _, name := range keys {
		if d := editDistance(strings.ToLower(k.Value), name); d < dist {
			best, dist = name, d
		}
	}
	msg := fmt.Sprintf("%s has no key %q", name, k.Value)
	if dist <= max(2, len(k.Value)/3) && dist < len(k.Value) {
		return &yamlError{k.Line, fmt.Sprintf("%s: did you mean %s?", msg, best)}
	}
	return &yamlError{k.Line, fmt.Sprintf("%s: give one of %s", msg, strings.Join(keys, ", "))}
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
