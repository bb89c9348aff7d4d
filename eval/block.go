package eval

import (
	"strings"
)

// normalizeTag turns an authored block tag into lowercase ASCII
// kebab-case: camelCase boundaries and every run of characters other than
// ASCII letters and digits (including '<' and '/') become one hyphen, and
// leading or trailing hyphens are dropped. "Personal Data",
// "personal_data", "personalData" and "personal-data" all become
// "personal-data". A tag without letters or digits normalizes to "",
// which leaves the block untagged.
func normalizeTag(tag string) string {
	var b strings.Builder
	b.Grow(len(tag) + 4)
	pendingHyphen := false
	prevClass := 0 // 0 none/separator, 1 lower, 2 upper, 3 digit
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		class := 0
		switch {
		case c >= 'a' && c <= 'z':
			class = 1
		case c >= 'A' && c <= 'Z':
			class = 2
		case c >= '0' && c <= '9':
			class = 3
		}
		if class == 0 {
			pendingHyphen = b.Len() > 0
			prevClass = 0
			continue
		}
		if class == 2 && b.Len() > 0 && !pendingHyphen {
			// fooBar -> foo-bar; HTTPServer -> http-server.
			nextLower := i+1 < len(tag) && tag[i+1] >= 'a' && tag[i+1] <= 'z'
			if prevClass == 1 || prevClass == 3 || (prevClass == 2 && nextLower) {
				pendingHyphen = true
			}
		}
		if pendingHyphen {
			b.WriteByte('-')
			pendingHyphen = false
		}
		if class == 2 {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
		prevClass = class
	}
	return b.String()
}

// blockDelimiters returns the text written before and after a block's
// children.
func blockDelimiters(tag string) (open, close string) {
	if t := normalizeTag(tag); t != "" {
		return "\n\n<" + t + ">\n", "\n</" + t + ">\n\n"
	}
	return "\n\n", "\n\n"
}

// blockIsEmpty reports whether a block has no children or only
// AML-empty (None/boolean) direct children; such a block contributes a
// single "\n\n".
func blockIsEmpty(b *Block) bool {
	for _, c := range b.Children {
		switch c.(type) {
		case nil, bool:
		default:
			return false
		}
	}
	return true
}

func trimSpace(s string) string { return strings.TrimSpace(s) }
