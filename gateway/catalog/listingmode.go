package catalog

import (
	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
)

// SearchMetaTools are search mode's meta-tools (gateway's search.go), in
// the order they are described.
var SearchMetaTools = []string{"search_tools", "describe_tools", "call_read_only_tool", "call_tool"}

// ListingMode says how the gateway would list c's tools under cfg's
// `catalog:` section, for the audit: flat, or search mode with what its
// tools/list holds (the meta-tools, then the pinned tools the catalog has).
// Nil when cfg cannot be resolved (Build has said why).
func (c *Catalog) ListingMode(cfg *config.Config) *annotations.Listing {
	r, err := cfg.Resolve()
	if err != nil {
		return nil
	}
	l := &annotations.Listing{Mode: r.Catalog.Mode, Threshold: r.Catalog.SearchThreshold, Search: r.Catalog.Search(len(c.Tools))}
	if !l.Search {
		return l
	}
	l.Listed = append(l.Listed, SearchMetaTools...)
	have := map[string]bool{}
	for _, t := range c.Tools {
		have[t.Tool.Name] = true
	}
	for _, n := range r.Catalog.Pinned {
		if have[n] {
			l.Listed = append(l.Listed, n)
		}
	}
	return l
}
