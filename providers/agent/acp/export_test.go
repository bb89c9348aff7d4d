package acp

import "time"

// SetBridgeTimeoutsForTest shortens the bridge's connection timeouts and
// returns a function that restores them.
func SetBridgeTimeoutsForTest(header, idle time.Duration) func() {
	h, i := bridgeHeaderTimeout, bridgeIdleTimeout
	bridgeHeaderTimeout, bridgeIdleTimeout = header, idle
	return func() { bridgeHeaderTimeout, bridgeIdleTimeout = h, i }
}
