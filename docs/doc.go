// Package docs holds mcpgate's documentation: the pages beside this file,
// linked from the repository's README.md. It has no code; its test checks
// that every relative link of the README and of these pages leads somewhere.
package docs
