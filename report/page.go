package report

import (
	"bufio"
	_ "embed"
	"fmt"
	"html"
	"io"
	"strings"
)

// The page's stylesheet and script, inlined into every report.
var (
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

// contentSecurityPolicy forbids every fetch: the page runs its one inline
// script and style and loads nothing.
const contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'"

// writePage writes the HTML page with the page data of encodeData.
func writePage(w io.Writer, title string, data []byte) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	title = escapeTitle(title)
	for _, s := range []string{
		"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
		"<meta http-equiv=\"Content-Security-Policy\" content=\"", contentSecurityPolicy, "\">\n",
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
		"<meta name=\"generator\" content=\"aml report\">\n",
		"<title>", title, " – AML report</title>\n<style>\n", pageCSS, "</style>\n</head>\n<body>\n",
		"<noscript><p class=\"noscript\">", title, ": this report draws its timeline with JavaScript; enable it to see the run.</p></noscript>\n",
		"<div id=\"app\"></div>\n<script type=\"application/json\" id=\"aml-data\">",
	} {
		bw.WriteString(s)
	}
	bw.Write(data)
	bw.WriteString("</script>\n<script>\n")
	bw.WriteString(pageJS)
	if _, err := bw.WriteString("</script>\n</body>\n</html>\n"); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// slashEscaper writes "/" as a character reference, so that no title (a
// file path, a URL) appears as a literal URL in the page.
var slashEscaper = strings.NewReplacer("/", "&#47;")

// escapeTitle escapes the title for HTML text.
func escapeTitle(s string) string { return slashEscaper.Replace(html.EscapeString(s)) }
