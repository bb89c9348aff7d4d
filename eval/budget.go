package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Usage is what agent sessions spent: tokens, model calls, tool calls and
// their cost. InputTokens counts every input token, cached ones included
// (CachedInputTokens is the part read from a cache); OutputTokens counts
// every output token, reasoning included (ReasoningTokens is that part).
// It is a plain value, safe to copy.
type Usage struct {
	InputTokens       int64   `json:"input_tokens,omitempty"`
	OutputTokens      int64   `json:"output_tokens,omitempty"`
	CachedInputTokens int64   `json:"cached_input_tokens,omitempty"`
	ReasoningTokens   int64   `json:"reasoning_tokens,omitempty"`
	ModelCalls        int64   `json:"model_calls,omitempty"`
	ToolCalls         int64   `json:"tool_calls,omitempty"`
	CostUSD           float64 `json:"cost_usd,omitempty"`
	// CostReported says that CostUSD came from the agent (or its usage
	// report) rather than from a price table.
	CostReported bool `json:"cost_reported,omitempty"`
}

// Tokens is the total the tokens budget counts: input and output.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// IsZero reports whether nothing was spent.
func (u Usage) IsZero() bool {
	return u.InputTokens == 0 && u.OutputTokens == 0 && u.ModelCalls == 0 && u.ToolCalls == 0 && u.CostUSD == 0
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + v.InputTokens,
		OutputTokens:      u.OutputTokens + v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens,
		ReasoningTokens:   u.ReasoningTokens + v.ReasoningTokens,
		ModelCalls:        u.ModelCalls + v.ModelCalls,
		ToolCalls:         u.ToolCalls + v.ToolCalls,
		CostUSD:           u.CostUSD + v.CostUSD,
		CostReported:      u.CostReported || v.CostReported,
	}
}

// String renders the spend as the run summary shows it: "12,345 tokens,
// $0.42"; the cost is left out when it is zero.
func (u Usage) String() string {
	s := groupDigits(u.Tokens()) + " tokens"
	if u.CostUSD > 0 {
		s += ", " + FormatUSD(u.CostUSD)
	}
	return s
}

// FormatUSD renders an amount of dollars with two decimals, or four below
// ten cents so that small spends do not read as $0.00.
func FormatUSD(v float64) string {
	if v > 0 && v < 0.1 {
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}

// ParseUsage reads the usage a provider reported (AgentResponse.Usage): a
// JSON object in AML's form (the json names of Usage's fields) or in
// ACP's (inputTokens, outputTokens, cachedReadTokens, cachedWriteTokens,
// thoughtTokens, totalTokens, and cost {amount, currency}); OpenAI's
// prompt_tokens and completion_tokens are read too. ACP counts cached and
// thought tokens apart from input and output when totalTokens is their
// sum (as its schema says), and inside them otherwise. Unknown fields are
// ignored; "" is no usage. A cost in another currency than USD is not
// counted.
func ParseUsage(s string) (Usage, error) {
	if s == "" {
		return Usage{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return Usage{}, fmt.Errorf("usage is not a JSON object: %w", err)
	}
	num := func(keys ...string) int64 {
		for _, k := range keys {
			if f, ok := m[k].(float64); ok && f > 0 && f < math.MaxInt64 {
				return int64(f)
			}
		}
		return 0
	}
	var u Usage
	if _, acp := m["inputTokens"]; acp {
		in, out := num("inputTokens"), num("outputTokens")
		cr, cw, th, total := num("cachedReadTokens"), num("cachedWriteTokens"), num("thoughtTokens"), num("totalTokens")
		u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.ReasoningTokens = in, out, cr, th
		if total == 0 || total >= in+out+cr+cw+th {
			u.InputTokens += cr + cw
			u.OutputTokens += th
		} else if total >= in+out+th {
			u.OutputTokens += th
		}
	} else {
		u.InputTokens = num("input_tokens", "prompt_tokens")
		u.OutputTokens = num("output_tokens", "completion_tokens")
		u.CachedInputTokens = num("cached_input_tokens")
		u.ReasoningTokens = num("reasoning_tokens")
	}
	u.ModelCalls = num("model_calls")
	if f, ok := m["cost_usd"].(float64); ok && f > 0 {
		u.CostUSD, u.CostReported = f, true
	} else if c, ok := m["cost"].(map[string]any); ok {
		if a, ok := c["amount"].(float64); ok && a > 0 && (c["currency"] == nil || strings.EqualFold(fmt.Sprint(c["currency"]), "USD")) {
			u.CostUSD, u.CostReported = a, true
		}
	}
	return u, nil
}

// Price is what a model costs, in US dollars per million tokens.
// CachedInput of zero means Input.
type Price struct {
	Input       float64 `json:"input"`
	Output      float64 `json:"output"`
	CachedInput float64 `json:"cached_input,omitempty"`
}

// Validate reports a price that is negative or not a finite number.
func (p Price) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cached_input", p.CachedInput}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s must be a non-negative number of US dollars per million tokens, got %v", f.name, f.v)
		}
	}
	return nil
}

// Cost is the price of u: uncached input at Input, cached input at
// CachedInput (or Input), output at Output.
func (p Price) Cost(u Usage) float64 {
	cached := p.CachedInput
	if cached == 0 {
		cached = p.Input
	}
	fresh := u.InputTokens - u.CachedInputTokens
	if fresh < 0 {
		fresh = 0
	}
	return (float64(fresh)*p.Input + float64(u.CachedInputTokens)*cached + float64(u.OutputTokens)*p.Output) / 1e6
}

// PriceOf finds a model's price: by its exact name, else by the part
// after the last "/" ("openai/gpt-5" finds "gpt-5"), else by the name
// with that prefix of any entry ("gpt-5" finds "openai/gpt-5").
func PriceOf(prices map[string]Price, model string) (Price, bool) {
	if model == "" {
		return Price{}, false
	}
	if p, ok := prices[model]; ok {
		return p, true
	}
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		if p, ok := prices[model[i+1:]]; ok {
			return p, true
		}
	}
	for k, p := range prices {
		if i := strings.LastIndexByte(k, '/'); i >= 0 && k[i+1:] == model {
			return p, true
		}
	}
	return Price{}, false
}

// Budget bounds what a run, a budget() subtree or one agent session may
// spend. A zero field sets no bound.
type Budget struct {
	// Tokens bounds input and output tokens together.
	Tokens int64
	// CostUSD bounds the cost in US dollars (see Options.Prices).
	CostUSD float64
	// ModelCalls bounds model calls; an agent turn counts as one unless
	// its usage report says how many it made.
	ModelCalls int64
	// ToolCalls bounds calls of AML tools (define_tool).
	ToolCalls int64
	// Wall bounds the elapsed time.
	Wall time.Duration
	// OnExceed is what happens when a budget of the run (Options.Budget,
	// its wall time aside) runs out: "fail" (or "", the default) fails
	// the run; "ask" asks for a new limit as a question with the id
	// "budget": a journaled run suspends until `aml resume RUN --answer
	// budget=AMOUNT` (ResumeOptions.Answers) raises the limit, replaying
	// what it had done; without a journal Options.Ask is asked, and the
	// run fails when there is none. budget() and agent(budget=) take
	// "fail" only.
	OnExceed string
}

// Validate reports a negative bound or a cost that is not a finite
// number.
func (b Budget) Validate() error {
	switch {
	case b.Tokens < 0:
		return fmt.Errorf("budget tokens must not be negative, got %d", b.Tokens)
	case b.CostUSD < 0 || math.IsNaN(b.CostUSD) || math.IsInf(b.CostUSD, 0):
		return fmt.Errorf("budget cost_usd must be a non-negative number of dollars, got %v", b.CostUSD)
	case b.ModelCalls < 0:
		return fmt.Errorf("budget model_calls must not be negative, got %d", b.ModelCalls)
	case b.ToolCalls < 0:
		return fmt.Errorf("budget tool_calls must not be negative, got %d", b.ToolCalls)
	case b.Wall < 0:
		return fmt.Errorf("budget wall_s must not be negative, got %v", b.Wall)
	case b.OnExceed != "" && b.OnExceed != "fail" && b.OnExceed != "ask":
		return fmt.Errorf("budget on_exceed must be \"fail\" or \"ask\", got %q", b.OnExceed)
	}
	return nil
}

// IsZero reports whether the budget bounds nothing.
func (b Budget) IsZero() bool {
	return b.Tokens == 0 && b.CostUSD == 0 && b.ModelCalls == 0 && b.ToolCalls == 0 && b.Wall == 0
}

// BudgetKeys are the keys of a budget dict, in the order errors list them.
var BudgetKeys = []string{"tokens", "cost_usd", "model_calls", "tool_calls", "wall_s"}

// BudgetError reports that a budget stopped the run. It arrives as the
// cause of an *EvaluationError that names the authored node it stopped
// (errors.As finds it).
type BudgetError struct {
	// Budget is the key that ran out: "tokens", "cost_usd",
	// "model_calls", "tool_calls" or "wall_s".
	Budget string
	// Spent and Limit are in the key's unit (tokens, dollars, calls,
	// seconds).
	Spent, Limit float64
	// Scope names whose budget it is: "the run", or the budget() or
	// agent() with its position.
	Scope string
	// Before is true when the spend was refused before it started (the
	// budget was already used up), false when a spend crossed it.
	Before bool

	// scope is the scope whose budget it is; wait, when set, is why the
	// run did not go on: it waits for a new limit (on_exceed "ask"), or
	// the limit it was given is no larger.
	scope *spendScope
	wait  error
}

// Unwrap returns why the run waits for a new limit, or nil.
func (e *BudgetError) Unwrap() error { return e.wait }

// Error says which budget of which scope ran out, by how much, and how to
// raise it.
func (e *BudgetError) Error() string {
	state := "exceeded"
	if e.Before && e.Spent <= e.Limit {
		state = "used up"
	}
	owner := "the run's " + e.Budget + " budget"
	how := "raise it with configure(budget = {...}) or " + budgetFlag(e.Budget)
	if e.Scope != "the run" {
		owner = "the " + e.Budget + " budget of " + e.Scope
		how = "raise it there"
	}
	msg := fmt.Sprintf("%s is %s (%s of %s spent); %s", owner, state, formatAmount(e.Budget, e.Spent), formatAmount(e.Budget, e.Limit), how)
	if e.wait != nil && e.wait != errSuspend {
		msg += "; " + e.wait.Error()
	}
	return msg
}

func budgetFlag(key string) string {
	switch key {
	case "tokens":
		return "--max-tokens"
	case "cost_usd":
		return "--max-cost"
	case "model_calls":
		return "--max-model-calls"
	case "tool_calls":
		return "--max-tool-calls"
	}
	return "--max-wall"
}

func formatAmount(key string, v float64) string {
	switch key {
	case "cost_usd":
		return FormatUSD(v)
	case "wall_s":
		return (time.Duration(v * float64(time.Second))).Round(time.Millisecond).String()
	case "tokens":
		return groupDigits(int64(v))
	}
	return strconv.FormatInt(int64(v), 10)
}

// spendScope accounts the spend of a run, a budget() subtree or an agent
// session against its budget, and adds it to the scopes around it. Safe
// for concurrent use.
type spendScope struct {
	parent *spendScope
	limit  Budget
	// name is "the run", or the budget() or agent() with its position.
	name   string
	prices map[string]Price
	mu     sync.Mutex
	spent  Usage
	// refused is the first budget error of a call refused in this scope
	// (a tool call an agent made), which ends the session after its
	// turn.
	refused *BudgetError
	// bounded says that the scope or one around it has a budget; an
	// unbounded chain only counts, so that a run without budgets pays
	// almost nothing for them. Set at creation.
	bounded bool
	// onExceed, on the run's scope of a budget with on_exceed "ask",
	// asks for a new limit: raised reports that the limit now exceeds
	// what was spent; wait is why the run cannot go on.
	onExceed func(be *BudgetError) (raised bool, wait error)
}

// settle offers a budget error to its scope's onExceed: true means the
// limit was raised and the spend may be tried again.
func settle(be *BudgetError) bool {
	if be == nil || be.scope == nil || be.scope.onExceed == nil || be.Budget == "wall_s" {
		return false
	}
	raised, wait := be.scope.onExceed(be)
	if wait != nil {
		be.wait = wait
		return false
	}
	return raised
}

// raise sets the limit of key to amount when that is more than what the
// scope spent of it, and reports whether it did.
func (s *spendScope) raise(key string, amount float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.spent
	switch key {
	case "tokens":
		if amount > float64(u.Tokens()) {
			s.limit.Tokens = int64(amount)
			return amount >= float64(u.Tokens()+1)
		}
	case "cost_usd":
		if amount > u.CostUSD {
			s.limit.CostUSD = amount
			return true
		}
	case "model_calls":
		if amount >= float64(u.ModelCalls+1) {
			s.limit.ModelCalls = int64(amount)
			return true
		}
	case "tool_calls":
		if amount >= float64(u.ToolCalls+1) {
			s.limit.ToolCalls = int64(amount)
			return true
		}
	}
	return false
}

// reserveTool takes one tool call from every scope of the chain, or
// records and returns the budget error that refuses it.
func (s *spendScope) reserveTool() *BudgetError {
	be := s.reserve(1, true)
	if be != nil && s != nil {
		s.refuse(be)
	}
	return be
}

// stopped returns the first refusal recorded in the scope, or nil.
func (s *spendScope) stopped() *BudgetError {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func newSpendScope(parent *spendScope, limit Budget, name string) *spendScope {
	s := &spendScope{parent: parent, limit: limit, name: name, bounded: !limit.IsZero()}
	if parent != nil {
		s.prices = parent.prices
		s.bounded = s.bounded || parent.bounded
	}
	return s
}

// total returns what the scope spent so far.
func (s *spendScope) total() Usage {
	if s == nil {
		return Usage{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spent
}

// costBudget reports whether a cost budget applies in the chain.
func (s *spendScope) costBudget() bool {
	for ; s != nil; s = s.parent {
		if s.limit.CostUSD > 0 {
			return true
		}
	}
	return false
}

// usedUp returns the error of the first budget in the chain that has
// nothing left for a model call (tokens, cost, model calls), or nil.
func (s *spendScope) usedUp() *BudgetError {
	if s == nil || !s.bounded {
		return nil
	}
	for {
		be := s.tryUsedUp()
		if !settle(be) {
			return be
		}
	}
}

func (s *spendScope) tryUsedUp() *BudgetError {
	for ; s != nil; s = s.parent {
		s.mu.Lock()
		l, u := s.limit, s.spent
		s.mu.Unlock()
		switch {
		case l.Tokens > 0 && u.Tokens() >= l.Tokens:
			return &BudgetError{Budget: "tokens", Spent: float64(u.Tokens()), Limit: float64(l.Tokens), Scope: s.name, Before: true, scope: s}
		case l.CostUSD > 0 && u.CostUSD >= l.CostUSD:
			return &BudgetError{Budget: "cost_usd", Spent: u.CostUSD, Limit: l.CostUSD, Scope: s.name, Before: true, scope: s}
		case l.ModelCalls > 0 && u.ModelCalls >= l.ModelCalls:
			return &BudgetError{Budget: "model_calls", Spent: float64(u.ModelCalls), Limit: float64(l.ModelCalls), Scope: s.name, Before: true, scope: s}
		}
	}
	return nil
}

// reserve takes n model calls (or tool calls, with tool true) from every
// scope of the chain, all or none: the calls are refused when a scope has
// fewer left, or when it has no tokens or cost left.
func (s *spendScope) reserve(n int64, tool bool) *BudgetError {
	if s == nil || n <= 0 {
		return nil
	}
	if !s.bounded {
		for c := s; c != nil; c = c.parent {
			c.mu.Lock()
			if tool {
				c.spent.ToolCalls += n
			} else {
				c.spent.ModelCalls += n
			}
			c.mu.Unlock()
		}
		return nil
	}
	if !tool {
		if err := s.usedUp(); err != nil {
			return err
		}
	}
	for {
		be := s.tryReserve(n, tool)
		if !settle(be) {
			return be
		}
	}
}

func (s *spendScope) tryReserve(n int64, tool bool) *BudgetError {
	// Lock the chain from the outside in, as every reserve does, so that
	// two reservations cannot each take the last call.
	var buf [8]*spendScope
	chain := buf[:0]
	for c := s; c != nil; c = c.parent {
		chain = append(chain, c)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		chain[i].mu.Lock()
	}
	defer func() {
		for _, c := range chain {
			c.mu.Unlock()
		}
	}()
	for _, c := range chain {
		if tool {
			if l := c.limit.ToolCalls; l > 0 && c.spent.ToolCalls+n > l {
				return &BudgetError{Budget: "tool_calls", Spent: float64(c.spent.ToolCalls), Limit: float64(l), Scope: c.name, Before: true, scope: c}
			}
		} else if l := c.limit.ModelCalls; l > 0 && c.spent.ModelCalls+n > l {
			return &BudgetError{Budget: "model_calls", Spent: float64(c.spent.ModelCalls), Limit: float64(l), Scope: c.name, Before: true, scope: c}
		}
	}
	for _, c := range chain {
		if tool {
			c.spent.ToolCalls += n
		} else {
			c.spent.ModelCalls += n
		}
	}
	return nil
}

// charge adds u (its model calls beyond the reserved ones included) to
// every scope of the chain and returns the error of the first budget it
// crossed, or nil.
func (s *spendScope) charge(u Usage) *BudgetError {
	var crossed *BudgetError
	for c := s; c != nil; c = c.parent {
		c.mu.Lock()
		c.spent = c.spent.Add(u)
		l, t := c.limit, c.spent
		c.mu.Unlock()
		if crossed != nil {
			continue
		}
		switch {
		case l.Tokens > 0 && t.Tokens() > l.Tokens:
			crossed = &BudgetError{Budget: "tokens", Spent: float64(t.Tokens()), Limit: float64(l.Tokens), Scope: c.name, scope: c}
		case l.CostUSD > 0 && t.CostUSD > l.CostUSD:
			crossed = &BudgetError{Budget: "cost_usd", Spent: t.CostUSD, Limit: l.CostUSD, Scope: c.name, scope: c}
		case l.ModelCalls > 0 && t.ModelCalls > l.ModelCalls:
			crossed = &BudgetError{Budget: "model_calls", Spent: float64(t.ModelCalls), Limit: float64(l.ModelCalls), Scope: c.name, scope: c}
		}
		if crossed != nil && c.onExceed != nil {
			// A budget that asks lets the spend that crossed it stand
			// (its session's work is done and recorded); the next spend
			// finds it used up and asks.
			crossed = nil
		}
	}
	return crossed
}

// price turns a session's reported usage into what it costs: the
// reported cost when there is one, else the price of the model, else
// nothing.
func (s *spendScope) price(u Usage, model string) Usage {
	if u.CostReported || s == nil {
		return u
	}
	if p, ok := PriceOf(s.prices, model); ok {
		u.CostUSD = p.Cost(u)
	}
	return u
}

// spendKey carries the innermost spend scope in a context: the session
// of an agent with a budget, or a budget() subtree.
type spendKey struct{}

// spendOf returns the innermost spend scope of ctx, else the run's.
func (d *domain) spendOf(ctx context.Context) *spendScope {
	if s, ok := ctx.Value(spendKey{}).(*spendScope); ok {
		return s
	}
	return d.spend
}

func withSpend(ctx context.Context, s *spendScope) context.Context {
	return context.WithValue(ctx, spendKey{}, s)
}

// budgetStop wraps a budget error with the position of the node it
// stopped.
func budgetStop(pos Position, e *BudgetError) *EvaluationError {
	return &EvaluationError{Msg: e.Error(), Pos: pos, Err: e}
}

// modelOf is the model a session of p uses, for pricing: the agent's
// model=, else the provider's default, else "".
func modelOf(p AgentProvider, req *AgentRequest) string {
	if req.Model != "" {
		return req.Model
	}
	if md, ok := p.(ModelDefaulter); ok {
		return md.DefaultModel()
	}
	return ""
}

// checkPrice refuses a session under a cost budget whose cost cannot be
// known: its model has no price and its provider reports no cost.
func (d *domain) checkPrice(s *spendScope, n *Agent, p AgentProvider, model string) error {
	if !s.costBudget() {
		return nil
	}
	if cr, ok := p.(CostReporter); ok && cr.ReportsCost() {
		return nil
	}
	if _, ok := PriceOf(s.prices, model); ok {
		return nil
	}
	if model == "" {
		return newError(n.Position, fmt.Sprintf("%s runs under a cost_usd budget, but it names no model= and provider %q reports no cost, so its cost cannot be counted; give it model= and that model a price in configure(prices = {...}) or --prices FILE", agentLabel(n), p.Name()))
	}
	return newError(n.Position, fmt.Sprintf("%s runs under a cost_usd budget, but model %q has no price and provider %q reports no cost; add it to configure(prices = {%q: {\"input\": ..., \"output\": ...}}) or --prices FILE (US dollars per million tokens)", agentLabel(n), model, p.Name(), model))
}

// chargeReport charges what a response reports spent, for a session part
// that reserved reserved model calls; the report's model calls beyond
// those are added. watched is the cost the agent reported while the part
// ran (SpendWatch), already charged: it is the part's cost unless the
// report names a higher one, and r then records it (Spent). A report
// that cannot be read is an error, since its spend would go uncounted.
func (s *spendScope) chargeReport(r *AgentResponse, model string, reserved int64, watched float64) error {
	if r.Spent == nil && r.Usage == "" {
		if watched > 0 {
			r.Spent = &Usage{ModelCalls: reserved, CostUSD: watched, CostReported: true}
		}
		return nil // nothing reported: the reserved calls are the spend
	}
	u, err := spentOf(r)
	if err != nil {
		return fmt.Errorf("the provider's usage report cannot be counted: %w", err)
	}
	if watched > 0 {
		total := max(u.CostUSD, watched)
		if !u.CostReported {
			total = watched
		}
		recorded := u
		recorded.CostUSD, recorded.CostReported = total, true
		recorded.ModelCalls = max(u.ModelCalls, reserved)
		r.Usage, r.Spent = "", &recorded
		u.CostUSD, u.CostReported = total-watched, true
	} else {
		u = s.price(u, model)
	}
	u.ModelCalls = max(u.ModelCalls-reserved, 0)
	if be := s.charge(u); be != nil {
		return be
	}
	return nil
}

// costWatch is the SpendWatch of an unmetered session.
type costWatch struct {
	s    *spendScope
	mu   sync.Mutex
	seen float64 // the last cumulative cost reported
}

// ReportCost implements SpendWatch.
func (w *costWatch) ReportCost(usd float64) error {
	w.mu.Lock()
	d := usd - w.seen
	if !(d > 0) || math.IsInf(usd, 0) {
		w.mu.Unlock()
		return nil
	}
	w.seen = usd
	w.mu.Unlock()
	if be := w.s.charge(Usage{CostUSD: d, CostReported: true}); be != nil {
		w.s.refuse(be)
		return be
	}
	return nil
}

// reported returns the cumulative cost reported so far.
func (w *costWatch) reported() float64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// sessionMeter is the SpendMeter of one session: its spend scope.
type sessionMeter struct{ s *spendScope }

// Reserve implements SpendMeter.
func (m sessionMeter) Reserve() error {
	if be := m.s.reserve(1, false); be != nil {
		m.s.refuse(be)
		return be
	}
	return nil
}

// Charge implements SpendMeter.
func (m sessionMeter) Charge(u Usage, model string) error {
	u = m.s.price(u, model)
	u.ModelCalls = 0
	if be := m.s.charge(u); be != nil {
		m.s.refuse(be)
		return be
	}
	return nil
}

// Left implements BudgetLeft.
func (m sessionMeter) Left() Budget { return m.s.left() }

// left is sessionMeter.Left.
func (s *spendScope) left() Budget {
	var b Budget
	least := func(cur *int64, limit, spent int64) {
		if limit <= 0 {
			return
		}
		l := max(limit-spent, 1)
		if *cur == 0 || l < *cur {
			*cur = l
		}
	}
	for c := s; c != nil; c = c.parent {
		c.mu.Lock()
		l, u := c.limit, c.spent
		c.mu.Unlock()
		least(&b.Tokens, l.Tokens, u.Tokens())
		least(&b.ModelCalls, l.ModelCalls, u.ModelCalls)
		least(&b.ToolCalls, l.ToolCalls, u.ToolCalls)
		if l.CostUSD > 0 {
			left := max(l.CostUSD-u.CostUSD, 1e-9)
			if b.CostUSD == 0 || left < b.CostUSD {
				b.CostUSD = left
			}
		}
	}
	return b
}

// Settle implements RemoteSpend.
func (m sessionMeter) Settle(u Usage, model, refused string) error {
	u = m.s.price(u, model)
	if be := m.s.charge(u); be != nil {
		m.s.refuse(be)
		return be
	}
	if refused == "" {
		return nil
	}
	for c := m.s; c != nil; c = c.parent {
		c.mu.Lock()
		l, t := c.limit, c.spent
		c.mu.Unlock()
		var be *BudgetError
		switch {
		case refused == "tokens" && l.Tokens > 0 && t.Tokens() >= l.Tokens:
			be = &BudgetError{Budget: refused, Spent: float64(t.Tokens()), Limit: float64(l.Tokens)}
		case refused == "cost_usd" && l.CostUSD > 0 && t.CostUSD >= l.CostUSD:
			be = &BudgetError{Budget: refused, Spent: t.CostUSD, Limit: l.CostUSD}
		case refused == "model_calls" && l.ModelCalls > 0 && t.ModelCalls >= l.ModelCalls:
			be = &BudgetError{Budget: refused, Spent: float64(t.ModelCalls), Limit: float64(l.ModelCalls)}
		case refused == "tool_calls" && l.ToolCalls > 0 && t.ToolCalls >= l.ToolCalls:
			be = &BudgetError{Budget: refused, Spent: float64(t.ToolCalls), Limit: float64(l.ToolCalls)}
		}
		if be != nil {
			be.Scope, be.Before, be.scope = c.name, true, c
			m.s.refuse(be)
			return be
		}
	}
	return nil
}

// LocalMeter is a SpendMeter over budgets of its own, outside any
// evaluation: a Temporal worker meters the calls of a session against
// what the run's budgets had left when the session started (BudgetLeft),
// and gives what it counted back to the run (RemoteSpend). It is safe for
// concurrent use.
type LocalMeter struct{ s *spendScope }

// NewLocalMeter returns a meter of limit (zero fields unbounded), which
// prices calls from prices; name says whose budgets they are in its
// errors.
func NewLocalMeter(limit Budget, prices map[string]Price, name string) *LocalMeter {
	s := newSpendScope(nil, limit, name)
	s.prices = prices
	return &LocalMeter{s: s}
}

// Reserve implements SpendMeter.
func (m *LocalMeter) Reserve() error { return sessionMeter{s: m.s}.Reserve() }

// Charge implements SpendMeter.
func (m *LocalMeter) Charge(u Usage, model string) error {
	return sessionMeter{s: m.s}.Charge(u, model)
}

// ReserveTool takes one tool call, or returns the *BudgetError that
// refuses it (the session then fails when its turn ends).
func (m *LocalMeter) ReserveTool() error {
	if be := m.s.reserveTool(); be != nil {
		return be
	}
	return nil
}

// Spent returns what the meter counted.
func (m *LocalMeter) Spent() Usage { return m.s.total() }

// Refused names the budget of the first call the meter refused, or "".
func (m *LocalMeter) Refused() string {
	if be := m.s.stopped(); be != nil {
		return be.Budget
	}
	return ""
}

// refuse records the first budget error of the scope, which ends its
// session after the turn.
func (s *spendScope) refuse(be *BudgetError) {
	s.mu.Lock()
	if s.refused == nil {
		s.refused = be
	}
	s.mu.Unlock()
}

// meteredResponse is r with what the metered calls of its turn spent
// (after less before) as its Spent, the figure a journal records, in
// place of the agent's own report.
func meteredResponse(r *AgentResponse, after, before Usage) *AgentResponse {
	c := *r
	d := Usage{
		InputTokens:       after.InputTokens - before.InputTokens,
		OutputTokens:      after.OutputTokens - before.OutputTokens,
		CachedInputTokens: after.CachedInputTokens - before.CachedInputTokens,
		ReasoningTokens:   after.ReasoningTokens - before.ReasoningTokens,
		ModelCalls:        after.ModelCalls - before.ModelCalls,
		CostUSD:           after.CostUSD - before.CostUSD,
		CostReported:      true, // priced when it was charged
	}
	c.Usage, c.Spent = "", &d
	return &c
}

// askForMore is the run scope's onExceed for on_exceed "ask": the
// question "budget" asks for a new limit of the budget that ran out. In a
// journaled run an answer given to the resume raises it (once per
// evaluation), and without one the run waits for it; without a journal
// Options.Ask is asked.
func (d *domain) askForMore(ctx context.Context) func(be *BudgetError) (bool, error) {
	var mu sync.Mutex
	used := false
	return func(be *BudgetError) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		q := Question{ID: "budget", Text: fmt.Sprintf("%s. What is the new limit of the run's %s budget?", strings.TrimSuffix(strings.SplitN(be.Error(), ";", 2)[0], "."), be.Budget),
			Schema: map[string]any{"type": "number", "exclusiveMinimum": be.Spent}}
		var answer any
		switch {
		case d.journal != nil:
			a, ok := d.journal.answers[q.ID]
			if !ok || used {
				jr := d.journal
				jr.mu.Lock()
				if jr.asked == nil {
					jr.asked = map[string]bool{}
				}
				if !jr.asked[q.ID] {
					jr.asked[q.ID] = true
					jr.pending = append(jr.pending, q)
				}
				jr.mu.Unlock()
				return false, errSuspend
			}
			used, answer = true, a
		case d.rt.opts.Ask != nil:
			schema, err := NewSchema(q.Schema)
			if err != nil {
				return false, err
			}
			a, err := d.askLive(ctx, q, schema)
			if err != nil {
				return false, err
			}
			answer = a
		default:
			return false, nil
		}
		amount, ok := answerAmount(answer)
		if !ok {
			return false, fmt.Errorf("the answer to question \"budget\" must be a number above %s, got %v", formatAmount(be.Budget, be.Spent), answer)
		}
		if !be.scope.raise(be.Budget, amount) {
			return false, fmt.Errorf("the new limit %s is not above what the run spent", formatAmount(be.Budget, amount))
		}
		return true, nil
	}
}

// answerAmount reads a number answer (a number, or text that is one).
func answerAmount(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}
