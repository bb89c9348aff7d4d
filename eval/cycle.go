package eval

import (
	"strings"
	"sync/atomic"
)

// compLink is one component on the chain of components whose bodies or
// returned values enclose the current evaluation point, innermost first.
// The chain is immutable and shared by nested evaluations (evaluate(),
// parallel branches), so a node that reaches itself through any of them
// is found.
type compLink struct {
	node   *Component
	parent *compLink
}

// enterComponent checks that n is not already being evaluated on chain
// and returns the chain with n innermost. A component whose value
// contains its own node would otherwise expand forever when max_depth is
// off. The caller must call leave on the returned link exactly once.
//
// Every active node carries a count of the chains it is on, so the chain
// is walked only when n is active somewhere (usually a sibling branch
// evaluating the same node): entering a component stays O(1) however
// deep the nesting.
func enterComponent(chain *compLink, n *Component) (*compLink, error) {
	if atomic.LoadInt32(&n.active) > 0 {
		for l := chain; l != nil; l = l.parent {
			if l.node == n {
				return nil, cycleError(chain, l, n)
			}
		}
	}
	atomic.AddInt32(&n.active, 1)
	return &compLink{node: n, parent: chain}, nil
}

// leave ends the link's component evaluation.
func (l *compLink) leave() {
	if l != nil {
		atomic.AddInt32(&l.node.active, -1)
	}
}

// cycleError names the cycle from the earlier evaluation of n (at first)
// through the components inside it back to n.
func cycleError(chain, first *compLink, n *Component) error {
	var path []string
	for l := chain; l != first; l = l.parent {
		path = append(path, componentLabel(l.node))
	}
	path = append(path, componentLabel(first.node))
	var b strings.Builder
	b.WriteString("cycle: component ")
	b.WriteString(n.Name)
	b.WriteString(" is evaluated inside itself (")
	for i := len(path) - 1; i >= 0; i-- {
		b.WriteString(path[i])
		b.WriteString(" → ")
	}
	b.WriteString(componentLabel(n))
	b.WriteString("), so its evaluation would never end; return a value that does not contain the component's own node (call the component again for each level of a recursion that ends), or loop in Starlark with evaluate()")
	return newError(n.Position, b.String())
}

func componentLabel(n *Component) string {
	if n.Position.IsValid() {
		return n.Name + " at " + n.Position.String()
	}
	return n.Name
}
