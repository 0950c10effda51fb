package umt5

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PromptClean is diffusers' Wan prompt_clean without its first step: Python's
// html.unescape applied twice, surrounding whitespace stripped, then every run of
// whitespace replaced by one space and the result stripped again. Whitespace is what
// Python's str.isspace and re's \s accept (Go's unicode.IsSpace plus U+001C..U+001F).
//
// diffusers first runs ftfy.fix_text, which has no Go port here; PromptClean skips it.
// ftfy repairs mojibake ("cafÃ©" -> "café"), straightens curly quotes, expands
// ligatures and full-width forms, and drops control and terminal-escape characters, so
// prompts with those differ; plain text, already-correct Unicode and HTML entities do not.
func PromptClean(text string) string {
	text = strings.TrimFunc(pyUnescape(pyUnescape(text)), pyIsSpace)
	var b strings.Builder
	space := false
	for _, r := range text {
		if pyIsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyUnescape is Python's html.unescape: character references matching
// &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?) are replaced; numeric ones by
// Python's rules (the HTML5 table for 0x00, 0x0D and 0x80..0x9F, U+FFFD for surrogates and
// values past U+10FFFF, nothing for the invalid code points), named ones by the HTML5
// entity table with the longest-prefix rule, which Go's html package implements identically.
func pyUnescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '&' {
			j := strings.IndexByte(s[i:], '&')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
			continue
		}
		n, repl := charref(s[i:])
		if n == 0 {
			b.WriteByte('&')
			i++
			continue
		}
		b.WriteString(repl)
		i += n
	}
	return b.String()
}

// charref matches one character reference at the start of s (which begins with '&') and
// returns its length and replacement; 0 when nothing matches.
func charref(s string) (int, string) {
	if len(s) >= 2 && s[1] == '#' {
		return numericRef(s)
	}
	// Named: [^\t\n\f <&#;]{1,32};? counted in characters.
	i, chars := 1, 0
	for i < len(s) && chars < 32 {
		c := s[i]
		if c == '\t' || c == '\n' || c == '\f' || c == ' ' || c == '<' || c == '&' || c == '#' || c == ';' {
			break
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		chars++
	}
	if chars == 0 {
		return 0, ""
	}
	if i < len(s) && s[i] == ';' {
		i++
	}
	return i, html.UnescapeString(s[:i])
}

// numericRef handles &#digits;? and &#[xX]hex;?.
func numericRef(s string) (int, string) {
	i, base := 2, 10
	if len(s) > 2 && (s[2] == 'x' || s[2] == 'X') {
		i, base = 3, 16
	}
	start := i
	num := 0
	for i < len(s) && digitValue(s[i], base) >= 0 {
		if num <= 0x10FFFF { // saturate: anything larger maps to U+FFFD
			num = num*base + digitValue(s[i], base)
		}
		i++
	}
	if i == start {
		return 0, ""
	}
	if i < len(s) && s[i] == ';' {
		i++
	}
	if r, ok := invalidCharrefs[num]; ok {
		return i, string(r)
	}
	if (num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF {
		return i, "\uFFFD"
	}
	if invalidCodepoint(num) {
		return i, ""
	}
	return i, string(rune(num))
}

func digitValue(c byte, base int) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case base == 16 && c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case base == 16 && c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// invalidCodepoint is Python html's _invalid_codepoints.
func invalidCodepoint(n int) bool {
	switch {
	case n >= 0x1 && n <= 0x8, n == 0xb, n >= 0xe && n <= 0x1f, n >= 0x7f && n <= 0x9f, n >= 0xfdd0 && n <= 0xfdef:
		return true
	}
	return n <= 0x10ffff && n&0xfffe == 0xfffe
}

// invalidCharrefs is Python html's _invalid_charrefs (the HTML5 numeric-reference table).
var invalidCharrefs = map[int]rune{
	0x00: '\ufffd', 0x0d: '\r', 0x80: '\u20ac', 0x81: '\x81', 0x82: '\u201a', 0x83: '\u0192',
	0x84: '\u201e', 0x85: '\u2026', 0x86: '\u2020', 0x87: '\u2021', 0x88: '\u02c6', 0x89: '\u2030',
	0x8a: '\u0160', 0x8b: '\u2039', 0x8c: '\u0152', 0x8d: '\x8d', 0x8e: '\u017d', 0x8f: '\x8f',
	0x90: '\x90', 0x91: '\u2018', 0x92: '\u2019', 0x93: '\u201c', 0x94: '\u201d', 0x95: '\u2022',
	0x96: '\u2013', 0x97: '\u2014', 0x98: '\u02dc', 0x99: '\u2122', 0x9a: '\u0161', 0x9b: '\u203a',
	0x9c: '\u0153', 0x9d: '\x9d', 0x9e: '\u017e', 0x9f: '\u0178',
}
