package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokens splits s into the terms the index holds: lower-case words cut at
// every character that is not a letter or a digit (so snake_case,
// kebab-case, paths, dotted names and {path} parameters all split, the
// braces dropped and the name kept), and at the case changes of camelCase
// and PascalCase, acronyms included ("getHTTPServer" gives get, http,
// server). Stopwords are dropped and each word is stemmed (see Stem). The
// same function reads documents and queries, so both sides agree.
func Tokens(s string) []string {
	var out []string
	eachWord(s, func(w string) {
		if t := term(w); t != "" {
			out = append(out, t)
		}
	})
	return out
}

// term is the indexed form of one lower-case word: "" for a stopword,
// else its stem, with the abbreviations of canonical folded into one form.
func term(w string) string {
	if stopwords[w] {
		return ""
	}
	if c, ok := canonical[w]; ok {
		w = c
	}
	return Stem(w)
}

// eachWord calls f with each lower-case word of s, in order.
func eachWord(s string, f func(string)) {
	start := -1 // byte offset of the current word; -1: none
	var prev rune
	flush := func(end int) {
		if start >= 0 && end > start {
			f(strings.ToLower(s[start:end]))
		}
		start = -1
	}
	for i, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			prev = 0
			continue
		}
		if start < 0 {
			start = i
			prev = r
			continue
		}
		if unicode.IsUpper(r) {
			switch {
			case unicode.IsLower(prev) || unicode.IsDigit(prev):
				// fooBar, v1Beta: a new word starts here.
				flush(i)
				start = i
			case unicode.IsUpper(prev):
				// HTTPServer: the S starts a word when a lower-case
				// letter follows it (the acronym ends before it).
				if next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):]); unicode.IsLower(next) {
					flush(i)
					start = i
				}
			}
		}
		prev = r
	}
	flush(len(s))
}

// stopwords are English function words and request filler that say
// nothing about which tool is meant.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the of for to in on at by with from into onto as and or
		is are was were be been being it its this that these those there here
		i me my we our you your he she they them their his her
		do does did can could would should will shall may might must
		please want need like just also some any which what who whom whose how when where why
		via per than then so if else not no yes about over under out up down
		have has had`) {
		stopwords[w] = true
	}
}

// canonical folds the abbreviations APIs use into one form, on both the
// document and the query side, so that "repository" finds GitHub's
// "repos_…" names and "repo" finds its descriptions. It holds only
// spelling variants of one word, never related words: those are synonyms
// (see synonyms), which score less than the word itself.
var canonical = map[string]string{
	"repository":     "repo",
	"repositories":   "repo",
	"repos":          "repo",
	"organization":   "org",
	"organizations":  "org",
	"organisation":   "org",
	"orgs":           "org",
	"configuration":  "config",
	"configurations": "config",
	"configs":        "config",
	"identifier":     "id",
	"identifiers":    "id",
	"ids":            "id",
	"information":    "info",
	"statistics":     "stat",
	"stats":          "stat",
	"specification":  "spec",
	"authentication": "auth",
	"authorisation":  "authorization",
}

// Stem strips the common English inflections from a lower-case word, so
// that "deployments", "deploying" and "deployed" all give "deploy": plural
// -s and -es (-ies to -y), -ing and -ed (undoubling "running" to "run"),
// and then a final -e ("create" and "created" both give "creat"). It is
// deliberately light — a few deterministic rules, not Porter's — because
// tool texts are short and technical, and an over-eager stemmer merges
// API nouns that differ ("status" keeps its s). Words of three letters or
// fewer, and words with digits, are left alone.
func Stem(w string) string {
	if len(w) <= 3 || strings.ContainsAny(w, "0123456789") {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "zes"),
		strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "uses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	switch {
	case (strings.HasSuffix(w, "tion") || strings.HasSuffix(w, "sion")) && len(w) >= 7:
		// eviction, deletion, collection: the verb's stem.
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ing") && len(w) >= 6:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) >= 5 && !strings.HasSuffix(w, "eed"):
		w = undouble(w[:len(w)-2])
	}
	if strings.HasSuffix(w, "e") && len(w) >= 4 && !strings.HasSuffix(w, "ee") {
		w = w[:len(w)-1]
	}
	return w
}

// undouble drops the last of a doubled final consonant that an inflection
// added ("runn" from "running", "starr" from "starred"); l, s and z double
// in English stems ("install", "pass"), so they stay.
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouylsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}
