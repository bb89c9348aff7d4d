package acp

import (
	"github.com/aml-go/aml/internal/redact"
)

// redactor removes the values AML itself passed to the agent process
// (env=, profile credentials such as API keys and tokens) from what the
// agent prints: stderr tails and protocol problems in errors and traces,
// and error answers. Other output of the agent is the agent's
// responsibility. The rule (values of 4 bytes or more, longest first,
// replaced by "[redacted]") is package redact's. It is immutable and
// safe for concurrent use.
type redactor = redact.Redactor

// newRedactor redacts the values of envs and the values in extra.
func newRedactor(extra []string, envs ...map[string]string) redactor {
	values := append([]string(nil), extra...)
	for _, m := range envs {
		for _, v := range m {
			values = append(values, v)
		}
	}
	return redact.New(values...)
}
