package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/docker/docker/client"
)

// NewClient returns an Engine API client from the environment, as the
// docker CLI finds its engine: DOCKER_HOST (with DOCKER_API_VERSION,
// DOCKER_CERT_PATH, DOCKER_TLS_VERIFY) wins; otherwise the context that
// DOCKER_CONTEXT names, else the current context of the CLI's
// configuration (DOCKER_CONFIG, default ~/.docker), when it is not
// "default"; otherwise the local socket. The client negotiates the API
// version with the engine.
func NewClient() (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if os.Getenv("DOCKER_HOST") == "" {
		host, err := contextHost()
		if err != nil {
			return nil, err
		}
		if host != "" {
			opts = append(opts, client.WithHost(host))
		}
	}
	return client.NewClientWithOpts(opts...)
}

// contextHost returns the engine address of the docker CLI's selected
// context, or "" for the default one.
func contextHost() (string, error) {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", nil
		}
		dir = filepath.Join(home, ".docker")
	}
	name := os.Getenv("DOCKER_CONTEXT")
	if name == "" {
		var cfg struct {
			CurrentContext string `json:"currentContext"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			return "", nil // no configuration: the default context
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return "", fmt.Errorf("docker sandbox: reading the docker CLI configuration %s: %w", filepath.Join(dir, "config.json"), err)
		}
		name = cfg.CurrentContext
	}
	if name == "" || name == "default" {
		return "", nil
	}
	sum := sha256.Sum256([]byte(name))
	meta := filepath.Join(dir, "contexts", "meta", hex.EncodeToString(sum[:]), "meta.json")
	data, err := os.ReadFile(meta)
	if err != nil {
		return "", fmt.Errorf("docker sandbox: the docker context %q is selected but cannot be read (%w); run docker context ls, or set DOCKER_HOST", name, err)
	}
	var m struct {
		Endpoints map[string]struct {
			Host string `json:"Host"`
		} `json:"Endpoints"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("docker sandbox: the docker context %q: %s: %w", name, meta, err)
	}
	host := m.Endpoints["docker"].Host
	if host == "" {
		return "", fmt.Errorf("docker sandbox: the docker context %q names no Docker endpoint (%s)", name, meta)
	}
	return host, nil
}
