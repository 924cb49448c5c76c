package config

import (
	"fmt"
	"slices"
)

// The catalog modes (CatalogConfig.Mode).
const (
	// CatalogFlat lists every tool served: tools/list is the catalog.
	CatalogFlat = "flat"
	// CatalogSearch lists the pinned tools and four meta-tools that
	// search, describe and call the others (see gateway's search mode).
	CatalogSearch = "search"
	// CatalogAuto is search mode when more than SearchThreshold tools are
	// served at start-up, flat otherwise.
	CatalogAuto = "auto"
)

// DefaultSearchThreshold is CatalogConfig.SearchThreshold's default: past
// a hundred tools a model's context fills with definitions it will mostly
// never call, and clients start capping what they show (VS Code: ~128).
const DefaultSearchThreshold = 100

// MaxPinned bounds CatalogConfig.Pinned: the pinned tools are listed whole
// in search mode, whose point is a short tools/list.
const MaxPinned = 64

// CatalogConfig is the `catalog:` section: how tools/list presents a large
// catalog.
//
//	catalog:
//	  mode: auto              # flat | search | auto
//	  search_threshold: 100
//	  pinned: [get_workflow]  # always listed as themselves
//
// The default mode is flat: a gateway that starts hiding its tools behind
// meta-tools after an upgrade, or when an API grows past a threshold,
// would break the clients that call tools by the names they list, so
// search mode is asked for (search, or auto with its threshold).
// Search mode governs what is listed, never what may be called: every
// tool stays callable by its name with tools/call.
type CatalogConfig struct {
	// Mode is flat, search or auto. Default flat.
	Mode string `yaml:"mode"`
	// SearchThreshold is auto's: search mode when more tools than this are
	// served. Default DefaultSearchThreshold.
	SearchThreshold int `yaml:"search_threshold"`
	// Pinned are tools listed as themselves in search mode, by their
	// served name (after tool_prefix and rename). At most MaxPinned.
	Pinned []string `yaml:"pinned"`
}

// Search reports whether a catalog of n served tools is listed in search
// mode. It is meaningful on a resolved configuration.
func (c CatalogConfig) Search(n int) bool {
	switch c.Mode {
	case CatalogSearch:
		return true
	case CatalogAuto:
		return n > c.SearchThreshold
	}
	return false
}

// resolve fills the defaults and checks the section.
func (c *CatalogConfig) resolve() error {
	switch c.Mode {
	case "":
		c.Mode = CatalogFlat
	case CatalogFlat, CatalogSearch, CatalogAuto:
	default:
		return fmt.Errorf("catalog.mode: %q is not flat, search or auto", c.Mode)
	}
	switch {
	case c.SearchThreshold < 0:
		return fmt.Errorf("catalog.search_threshold: %d is negative", c.SearchThreshold)
	case c.SearchThreshold == 0:
		c.SearchThreshold = DefaultSearchThreshold
	}
	if len(c.Pinned) > MaxPinned {
		return fmt.Errorf("catalog.pinned: %d tools, at most %d: search mode's tools/list is meant to stay short", len(c.Pinned), MaxPinned)
	}
	for i, name := range c.Pinned {
		if name == "" {
			return fmt.Errorf("catalog.pinned[%d]: empty tool name", i)
		}
		if j := slices.Index(c.Pinned, name); j < i {
			return fmt.Errorf("catalog.pinned: %q is listed twice (items %d and %d)", name, j, i)
		}
	}
	return nil
}
