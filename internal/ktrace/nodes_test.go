package ktrace

import "testing"

// Paths are built up from the names replies gave, per connection; a name
// missing on the way up (looked up before the trace) or a loop gives none.
func TestNodeNamesPath(t *testing.T) {
	n := nodeNames{}
	n.add(40, 2, 1, "dir")
	n.add(40, 3, 2, "sub")
	n.add(40, 4, 3, "file")
	n.add(41, 2, 1, "other")
	n.add(40, 7, 9, "orphan") // parent 9 never named
	n.add(40, 8, 8, "loop")
	for _, c := range []struct {
		conn uint32
		node uint64
		want string
		ok   bool
	}{
		{40, 1, "/", true}, {40, 2, "/dir", true}, {40, 4, "/dir/sub/file", true}, {41, 2, "/other", true},
		{41, 4, "", false}, {40, 7, "", false}, {40, 8, "", false}, {40, 99, "", false},
	} {
		got, ok := n.path(c.conn, c.node)
		if got != c.want || ok != c.ok {
			t.Errorf("conn %d node %d: %q %v, want %q %v", c.conn, c.node, got, ok, c.want, c.ok)
		}
	}
	// A rename moves the node: the latest reply wins.
	n.add(40, 4, 2, "moved")
	if got, _ := n.path(40, 4); got != "/dir/moved" {
		t.Errorf("after a rename: %q", got)
	}
}
