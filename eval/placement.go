package eval

import (
	"fmt"
	"strings"
)

// place is the placement context of a value: which owner its
// agent-scoped nodes would attach to.
type place struct {
	// agent is set inside an agent() plan.
	agent bool
	// inSystem is set inside a system() of that plan.
	inSystem bool
	// inFollowUp is set inside a follow_up() of that plan.
	inFollowUp bool
	// sandbox is set inside an active sandbox(); sandboxRO when its
	// statically known access is read-only.
	sandbox   bool
	sandboxRO bool
	// workspace is set inside a workspace().
	workspace bool
	// behind is the boundary (sandbox(), workspace(), parallel())
	// between the nearest agent() and this position, if any: nodes that
	// belong to an agent plan may not cross one.
	behind boundary
}

// boundary is a node between an agent and its descendants that agent-plan
// nodes may not cross.
type boundary uint8

const (
	noBoundary boundary = iota
	sandboxBoundary
	workspaceBoundary
	parallelBoundary
)

func (b boundary) String() string {
	return [...]string{"", "sandbox()", "workspace()", "parallel()"}[b]
}

// scopes keeps only the resource scopes of pl, dropping agent ownership.
func (pl place) scopes() place {
	return place{sandbox: pl.sandbox, sandboxRO: pl.sandboxRO, workspace: pl.workspace}
}

// crossed returns pl seen from inside the boundary named by kind: an
// agent around it no longer owns what lies inside.
func (pl place) crossed(kind boundary) place {
	if pl.agent && pl.behind == noBoundary {
		pl.behind = kind
	}
	return pl
}

// behindError rejects an agent-plan node (system(), follow_up(), tool(),
// mcp(), skill()) separated from its agent by a boundary.
func behindError(n Node, b boundary) error {
	name, behind := n.Kind()+"()", b.String()
	why, fix := behind+" is a resource scope", ", or put the "+behind+" around the agent()"
	if b == parallelBoundary {
		why, fix = "parallel() runs each branch as its own evaluation", ""
	}
	return newError(n.Pos(), fmt.Sprintf("%s inside %s does not reach the agent() around the %s: agent-plan nodes must be direct children of their agent() (lists, fragment(), block(), provide() and components are transparent; %s); move the %s out of the %s into the agent()%s", name, behind, behind, why, name, behind, fix))
}

// scopePlace is the placement context of a value evaluated inside the
// resource scopes res: a component's evaluate() runs inside the
// workspace() and sandbox() around the component, so file() and
// include(path=) may appear there, and a second workspace() or a
// widening sandbox() may not.
func scopePlace(res resScope) place {
	var pl place
	if res.ws != nil {
		pl.workspace = true
	}
	if res.sb != nil {
		pl.sandbox = true
		pl.sandboxRO = res.sb.access == ReadOnly
	}
	return pl
}

// childPlace returns the placement context of n's children, or an error
// if n may not appear in pl.
func childPlace(n Node, pl place) (place, error) {
	switch n := n.(type) {
	case *Agent:
		if n.Cwd != "" && !pl.sandbox {
			return pl, newError(n.Position, "agent(cwd=...) requires an enclosing sandbox(); cwd narrows the sandbox's working directory and does not create one")
		}
		c := pl.scopes()
		c.agent = true
		return c, nil
	case *System:
		switch {
		case pl.behind != noBoundary:
			return pl, behindError(n, pl.behind)
		case !pl.agent:
			return pl, newError(n.Position, "system() is only valid inside agent(); move it into the agent whose system prompt it extends")
		case pl.inSystem:
			return pl, newError(n.Position, "system() cannot contain another system(); list them one after another inside agent()")
		case pl.inFollowUp:
			return pl, newError(n.Position, "system() is not valid inside follow_up(); system text applies to the whole session, so put it directly in agent()")
		}
		c := pl.scopes()
		c.agent, c.inSystem = true, true
		return c, nil
	case *FollowUp:
		switch {
		case pl.behind != noBoundary:
			return pl, behindError(n, pl.behind)
		case !pl.agent:
			return pl, newError(n.Position, "follow_up() is only valid inside agent(); move it into the agent whose session it continues")
		case pl.inFollowUp:
			return pl, newError(n.Position, "follow_up() cannot contain another follow_up(); follow-ups are flat: list them one after another inside agent()")
		case pl.inSystem:
			return pl, newError(n.Position, "follow_up() is not valid inside system(); put it directly in agent()")
		}
		c := pl.scopes()
		c.agent, c.inFollowUp = true, true
		return c, nil
	case *Include:
		if n.Path != "" && !pl.sandbox && !pl.workspace {
			return pl, newError(n.Position, "include(path=...) requires an enclosing workspace() or sandbox(); use src= for an application file read from the runtime's working directory")
		}
		return pl, nil
	case *File:
		switch {
		case !pl.sandbox && !pl.workspace:
			return pl, newError(n.Position, "file() requires an enclosing workspace() or sandbox(): it writes into the nearest active filesystem")
		case pl.sandboxRO:
			return pl, newError(n.Position, "file() cannot write through a read-only sandbox(); give the sandbox access = \"read-write\"")
		}
		return pl, nil
	case *Workspace:
		switch {
		case pl.sandbox:
			return pl, newError(n.Position, "workspace() cannot be inside sandbox(): the workspace is the outer, durable scope; put the sandbox inside it")
		case pl.workspace:
			return pl, newError(n.Position, "a workspace() cannot contain another workspace(): one workspace is allowed per evaluation")
		}
		c := pl.crossed(workspaceBoundary)
		c.workspace = true
		return c, nil
	case *Sandbox:
		if pl.sandbox && n.Provider != nil {
			return pl, newError(n.Position, "a nested sandbox() cannot select another provider: it reuses the outer sandbox's lease")
		}
		if pl.sandboxRO && n.Access == ReadWrite {
			return pl, newError(n.Position, "a nested sandbox() cannot widen read-only access to read-write")
		}
		if n.Access != "" && n.Access != ReadOnly && n.Access != ReadWrite {
			return pl, newError(n.Position, fmt.Sprintf("sandbox access must be %q or %q, got %q", ReadOnly, ReadWrite, n.Access))
		}
		c := pl.crossed(sandboxBoundary)
		c.sandbox = true
		switch {
		case n.Access == ReadOnly:
			c.sandboxRO = true
		case n.Access == "" && !pl.sandbox:
			c.sandboxRO = true
		}
		return c, nil
	case *ToolGrant, *MCPGrant, *Skill:
		name := n.Kind() + "()"
		switch {
		case pl.behind != noBoundary:
			return pl, behindError(n, pl.behind)
		case !pl.agent:
			return pl, newError(n.Pos(), name+" is only valid inside agent(); move it into the agent that may use it")
		case pl.inSystem:
			return pl, newError(n.Pos(), name+" is not valid inside system(); grant it directly in agent()")
		case pl.inFollowUp:
			return pl, newError(n.Pos(), name+" is not valid inside follow_up(); capabilities apply to the whole session, so grant it directly in agent()")
		}
		return pl, nil
	case *BudgetScope:
		if pl.agent {
			return pl, newError(n.Position, "budget() is not valid inside agent(); put it around the agent, or give the agent budget = {...}")
		}
		return pl.scopes(), nil
	case *Parallel:
		// Each branch is its own nested evaluation: agent-scoped nodes in a
		// branch do not attach to an agent around the parallel().
		c := pl.scopes()
		if pl.agent {
			c.behind = pl.crossed(parallelBoundary).behind
		}
		return c, nil
	}
	return pl, nil
}

// countsDepth reports whether n adds one level of semantic depth.
func countsDepth(n Node) bool {
	switch n := n.(type) {
	case *Fragment:
		return false
	case *Component:
		return !n.Entry
	}
	return true
}

func depthError(pos Position, max int) error {
	return limitError(pos, "max_depth", max, fmt.Sprintf("AML evaluation exceeded max_depth %d; flatten the nesting, or raise the limit with configure(max_depth=N) or --max-depth N (0 disables the limit)", max))
}

func promptSizeError(n *Agent, size, max int) error {
	return limitError(n.Position, "max_prompt_bytes", max, fmt.Sprintf("%s would send %d bytes (its system text, prompt and follow-ups), which exceeds max_prompt_bytes %d; send less (include() stages a large file for the agent to read instead of pasting it), or raise the limit with configure(max_prompt_bytes=N) or --max-prompt-bytes N (0 disables the limit)", agentLabel(n), size, max))
}

func turnsError(n *Agent, turns, max int) error {
	return limitError(n.Position, "max_turns_per_agent", max, fmt.Sprintf("%s has %d turns (the initial prompt and %d follow_up()), which exceeds max_turns_per_agent %d; remove follow-ups or raise the limit with configure(max_turns_per_agent=N) or --max-turns-per-agent N", agentLabel(n), turns, turns-1, max))
}

func textAfterFollowUpError(pos Position) error {
	return newError(pos, "agent() prompt text after the first follow_up() is not allowed: move the text before the first follow_up(), or into a follow_up() of its own")
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }
