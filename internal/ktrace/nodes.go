package ktrace

import "strings"

// nodeNames maps each connection's node ids to their parent and name, as
// the kernel learnt them from the replies that made entries, so that a node
// can be named by its path in its mount.
type nodeNames map[uint32]map[uint64]nodeName

type nodeName struct {
	parent uint64
	name   string
}

// rootNode is the node id of every FUSE mount's root (FUSE_ROOT_ID).
const rootNode = 1

func (n nodeNames) add(conn uint32, node, parent uint64, name string) {
	m := n[conn]
	if m == nil {
		m = map[uint64]nodeName{}
		n[conn] = m
	}
	m[node] = nodeName{parent: parent, name: name}
}

// path is a node's path in its mount ("/" for the root, "/dir/file"), and
// false when a name on the way up is unknown (the node was looked up before
// the trace began) or the chain loops.
func (n nodeNames) path(conn uint32, node uint64) (string, bool) {
	if node == rootNode {
		return "/", true
	}
	m := n[conn]
	var parts []string
	for seen := 0; node != rootNode; seen++ {
		e, ok := m[node]
		if !ok || seen > 4096 {
			return "", false
		}
		parts = append(parts, e.name)
		node = e.parent
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return "/" + strings.Join(parts, "/"), true
}
