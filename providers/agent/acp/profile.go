package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/option"
)

// Base holds the options every agent profile shares. A profile's Options
// embed it and add only what is their own (the built-in profiles in
// providers/agent/... do); NewProfile applies the profile's defaults and
// validates them.
type Base struct {
	// Name is the provider name in traces and errors; "" means the
	// profile's.
	Name string
	// Command is the agent executable (or the profile's ACP adapter); ""
	// means the profile's.
	Command string
	// Args are literal arguments; where they go is the profile's choice.
	Args []string
	// Env adds environment variables (credentials); never traced.
	Env map[string]string
	// Model is the fallback model, used when agent(model=) is empty; ""
	// means the profile's (often none).
	Model string
	// WorkingDirectory is the session cwd outside a sandbox; "" means the
	// process working directory.
	WorkingDirectory string
	// Relay, ClientVersion and HandshakeTimeout are as in Config.
	Relay            []string
	ClientVersion    string
	HandshakeTimeout time.Duration
	// NoMeter turns the model gateway off for a profile that meters
	// (meter = False in Starlark): budgets then count the agent's own
	// usage reports.
	NoMeter bool
}

// ModelFor returns the model of a session: the agent's model=, else the
// fallback.
func (b *Base) ModelFor(req *eval.AgentRequest) string {
	if req != nil && req.Model != "" {
		return req.Model
	}
	return b.Model
}

// LaunchEnv returns a fresh copy of Env for one launch, never nil, to
// which the profile adds its own variables.
func (b *Base) LaunchEnv() map[string]string {
	e := maps.Clone(b.Env)
	if e == nil {
		e = map[string]string{}
	}
	return e
}

// ProfileSpec describes an agent profile to NewProfile.
type ProfileSpec struct {
	// Factory names the profile in errors, as its Starlark factory
	// ("codex_agent").
	Factory string
	// Name, Command and Model are the defaults of the Base fields.
	Name, Command, Model string
	// DirectoryOption names the working directory in errors; "" means
	// "working_directory".
	DirectoryOption string
	// Strings are the profile's own string options, checked with the
	// base's by the one option rule (providers/option); Secret lists
	// those whose values are credentials.
	Strings map[string]string
	Secret  []string
	// NativeSkills is Config.NativeSkills.
	NativeSkills bool
	// Meters says that the profile routes every model endpoint of its
	// agent through LaunchContext.Route, so that sessions on the host are
	// metered (Config.Meter) unless the base's NoMeter is set.
	Meters bool
	// MeterFor, when set, is Config.MeterFor, given the base with its
	// defaults applied.
	MeterFor func(b *Base, req *eval.AgentRequest) bool
	// Launch prepares one session's launch (Config.Profile), given the
	// base with its defaults applied and its Args and Env captured.
	Launch func(ctx context.Context, lc LaunchContext, b *Base) (*Launch, error)
}

// NewProfile returns the provider of a profile: b with spec's defaults,
// every string option validated, Args and Env captured (later changes by
// the caller have no effect), and spec.Launch as the session profile.
func NewProfile(b Base, spec ProfileSpec) (*Provider, error) {
	if b.Name == "" {
		b.Name = spec.Name
	}
	if b.Command == "" {
		b.Command = spec.Command
	}
	if b.Model == "" {
		b.Model = spec.Model
	}
	dir := spec.DirectoryOption
	if dir == "" {
		dir = "working_directory"
	}
	values := map[string]string{"name": b.Name, "command": b.Command, "model": b.Model, dir: b.WorkingDirectory}
	maps.Copy(values, spec.Strings)
	if err := option.CheckAll(spec.Factory, values, spec.Secret...); err != nil {
		return nil, err
	}
	b.Args = slices.Clone(b.Args)
	b.Env = maps.Clone(b.Env)
	b.Relay = slices.Clone(b.Relay)
	launch := spec.Launch
	// The profile's credentials and the user's env= values are redacted
	// from whatever the agent prints.
	var secrets []string
	for _, name := range spec.Secret {
		secrets = append(secrets, spec.Strings[name])
	}
	for _, v := range b.Env {
		secrets = append(secrets, v)
	}
	var meterFor func(*eval.AgentRequest) bool
	if spec.MeterFor != nil {
		meterFor = func(req *eval.AgentRequest) bool { return spec.MeterFor(&b, req) }
	}
	return New(Config{Name: b.Name, Command: b.Command, WorkingDirectory: b.WorkingDirectory, NativeSkills: spec.NativeSkills, Meter: spec.Meters && !b.NoMeter, MeterFor: meterFor, Model: b.Model,
		Relay: b.Relay, ClientVersion: b.ClientVersion, HandshakeTimeout: b.HandshakeTimeout,
		Profile: func(ctx context.Context, lc LaunchContext) (*Launch, error) {
			l, err := launch(ctx, lc, &b)
			if l != nil {
				l.Secrets = append(l.Secrets, secrets...)
			}
			return l, err
		}})
}

// Captured is a JSON configuration object captured when a profile is
// built: later changes by the caller have no effect, and values that are
// not JSON data are rejected then. Each launch gets a fresh copy to add
// its session settings to.
type Captured struct{ raw []byte }

// Capture captures v (nil is an empty object); the error names the
// profile's factory and option.
func Capture(factory, option string, v map[string]any) (Captured, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return Captured{}, fmt.Errorf("%s: %s must be JSON data: %w", factory, option, err)
	}
	return Captured{raw: raw}, nil
}

// Fresh returns a new copy of the captured object, never nil.
func (c Captured) Fresh() (map[string]any, error) {
	var m map[string]any
	if len(c.raw) > 0 {
		if err := json.Unmarshal(c.raw, &m); err != nil {
			return nil, err
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// SharedCache is the directory of a cache that a profile's sessions share
// (an agent's unpacked package, Node's compile cache): the value of the
// variable name in env or, on the host (local), in the process
// environment, else, on the host, <user cache dir>/aml/<sub>
// (os.UserCacheDir); "" in a sandbox that names none.
func SharedCache(env map[string]string, local bool, name, sub string) string {
	if v := env[name]; v != "" {
		return v
	}
	if !local {
		return ""
	}
	if v := os.Getenv(name); v != "" {
		return v
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "aml", sub)
}

// SettingsFile returns an agent's settings file as indented JSON: user's
// settings with fixed set over them, key by key; where both hold a dict
// under one key the two are merged the same way, so that a user's other
// keys in that section stay. factory names the profile in errors, for a
// user value that is not a dict where fixed holds one.
func SettingsFile(factory string, user, fixed map[string]any) ([]byte, error) {
	out, err := overlay(factory, "settings", user, fixed)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: settings are not JSON data: %w", factory, err)
	}
	return b, nil
}

// overlay returns base with fixed set over it (see SettingsFile); neither
// argument is changed.
func overlay(factory, path string, base, fixed map[string]any) (map[string]any, error) {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range fixed {
		sub, ok := v.(map[string]any)
		if !ok {
			out[k] = v
			continue
		}
		var under map[string]any
		switch u := out[k].(type) {
		case nil:
		case map[string]any:
			under = u
		default:
			return nil, fmt.Errorf("%s: %s[%q] must be a dict, got %T", factory, path, k, u)
		}
		merged, err := overlay(factory, fmt.Sprintf("%s[%q]", path, k), under, sub)
		if err != nil {
			return nil, err
		}
		out[k] = merged
	}
	return out, nil
}
