// Package browsertest drives Debian's headless Chromium through the
// DevTools protocol (chromedp) for the tests of pages aml writes (the run
// report, the workflow graph): a fresh browser per test with the network
// off, recording every request and every error the page reports.
// AML_CHROMIUM names another browser binary; AML_TEST_ARTIFACTS names a
// directory that keeps the screenshots.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Timeout bounds a page's browser, from its start to the end of the test.
const Timeout = 60 * time.Second

// Chromium returns the browser to test with ($AML_CHROMIUM, else
// /usr/bin/chromium), or skips the test saying how to install it.
func Chromium(t testing.TB) string {
	t.Helper()
	path := os.Getenv("AML_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Skipf("chromium not found: install it with `apt-get install chromium` (or set AML_CHROMIUM); looked for %s", path)
	}
	return path
}

// Page is one tab of a fresh headless browser with the network off. It
// records every request and every error the page reports. Its methods
// are safe for concurrent use.
type Page struct {
	// Ctx is the tab's chromedp context, for chromedp.Run and Do.
	Ctx context.Context

	recorder
	// onProblem, when set, is called (with mu held) for a new problem.
	onProblem func()
}

// recorder keeps what a page requested and the errors it reported, for
// both browsers.
type recorder struct {
	mu       sync.Mutex
	requests []string
	problems []string
}

func (p *Page) problem(s string) {
	p.problems = append(p.problems, s)
	if p.onProblem != nil {
		p.onProblem()
	}
}

// listen runs on the tab's event loop: it only records.
func (p *Page) listen(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		p.requests = append(p.requests, ev.Request.URL)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, a.Description+string(a.Value))
			}
			p.problem(fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		p.problem(fmt.Sprintf("uncaught exception at %s:%d:%d: %s", d.URL, d.LineNumber+1, d.ColumnNumber+1, text))
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			p.problem(fmt.Sprintf("log %s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	}
}

// New starts a browser with a fresh profile and returns its first tab,
// with the network emulated offline; the browser ends with the test.
func New(t testing.TB) *Page {
	t.Helper()
	path := Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	p := &Page{}
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(p.listen))
	t.Cleanup(cancelTab)
	p.Ctx = tabCtx
	if err := chromedp.Do(tabCtx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	if err := goOffline(tabCtx); err != nil {
		t.Fatalf("switching the network off: %v", err)
	}
	return p
}

// goOffline emulates a disconnected network in the tab. The shape of
// Network.emulateNetworkConditionsByRule changed between Chromium
// releases (offline moved from the command into each rule), so the
// command is tried in the current shape, then in the earlier one, then
// the deprecated Network.emulateNetworkConditions.
func goOffline(ctx context.Context) error {
	_, err := chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}},
	})
	if err != nil {
		raw := func(method string, params map[string]any) error {
			return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				return t.Call(ctx, method, params, nil)
			}))
		}
		rule := map[string]any{"urlPattern": "", "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
		if err2 := raw("Network.emulateNetworkConditionsByRule", map[string]any{"offline": true, "matchedNetworkConditions": []any{rule}}); err2 != nil {
			if err3 := raw("Network.emulateNetworkConditions", map[string]any{"offline": true, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}); err3 != nil {
				return fmt.Errorf("no form of the offline emulation was accepted: %w", errors.Join(err, err2, err3))
			}
		}
	}
	if _, err := chromedp.Call(ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
		return fmt.Errorf("overriding the network state: %w", err)
	}
	online, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`navigator.onLine`))
	if err != nil {
		return err
	}
	if online {
		return errors.New("navigator.onLine is still true")
	}
	return nil
}

// Open loads file and waits until the page has rendered (it sets
// document.body.dataset.ready to "1"); it returns the time from the start
// of the navigation to the rendered page. Any error the page reported,
// and any request other than the file, fails the test.
func (p *Page) Open(t testing.TB, file string) time.Duration {
	t.Helper()
	u := (&url.URL{Scheme: "file", Path: file}).String()
	start := time.Now()
	if err := chromedp.Do(p.Ctx, chromedp.Navigate(u)); err != nil {
		t.Fatalf("opening %s: %v", u, err)
	}
	// Wait for the page to say it rendered; an error in the page ends the
	// wait at once.
	waitCtx, stop := context.WithCancel(p.Ctx)
	p.mu.Lock()
	p.onProblem = stop
	if len(p.problems) > 0 {
		stop()
	}
	p.mu.Unlock()
	_, err := chromedp.Run(waitCtx, chromedp.Poll[bool](`document.body && document.body.dataset.ready === "1"`, chromedp.WithPollingTimeout(Timeout)))
	took := time.Since(start)
	p.mu.Lock()
	p.onProblem = nil
	p.mu.Unlock()
	stop()
	if err != nil {
		t.Fatalf("the page did not render: %v; problems: %q", err, p.Errors())
	}
	p.Check(t, u)
	return took
}

// Errors are the errors the page reported so far.
func (r *recorder) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.problems...)
}

// Check fails the test for any error the page reported and any request
// other than self (a URL) or an about: page.
func (r *recorder) Check(t testing.TB, self string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Errorf("the page reported an error: %s", p)
	}
	for _, u := range r.requests {
		if u != self && !strings.HasPrefix(u, "about:") {
			t.Errorf("the page requested %s", u)
		}
	}
}

// Eval evaluates expr in the page and returns its value.
func Eval[T any](t testing.TB, p *Page, expr string) T {
	t.Helper()
	v, err := chromedp.Run(p.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Screenshot saves a PNG of the whole page as a test artifact, named
// name, in $AML_TEST_ARTIFACTS (made when missing), else in a temporary
// directory, and logs its path.
func (p *Page) Screenshot(t testing.TB, name string) {
	t.Helper()
	png, err := chromedp.Run(p.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveArtifact(t, name, png)
}

// saveArtifact writes a test artifact named name to $AML_TEST_ARTIFACTS
// (made when missing), else to a temporary directory, and logs its path.
func saveArtifact(t testing.TB, name string, data []byte) {
	t.Helper()
	dir := os.Getenv("AML_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifact: %s", path)
}
