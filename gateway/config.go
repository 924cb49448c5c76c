package gateway

import "github.com/mcpgate/mcpgate/gateway/config"

// The configuration lives in package config; these names keep the
// gateway's API as it was (gateway.Config, gateway.LoadConfig, …), so an
// embedding service reads the same whichever package it imports.
type (
	Config         = config.Config
	MetricsConfig  = config.MetricsConfig
	TracingConfig  = config.TracingConfig
	Upstream       = config.Upstream
	Overrides      = config.Overrides
	Playbooks      = config.Playbooks
	PlaybookItem   = config.PlaybookItem
	PlaybookInput  = config.PlaybookInput
	TasksConfig    = config.TasksConfig
	StateConfig    = config.StateConfig
	RedisConfig    = config.RedisConfig
	Prompt         = config.Prompt
	PromptArgument = config.PromptArgument
)

// Defaults of Config; see package config.
const (
	LogText                     = config.LogText
	LogJSON                     = config.LogJSON
	DefaultListen               = config.DefaultListen
	DefaultTimeout              = config.DefaultTimeout
	DefaultMaxToolBytes         = config.DefaultMaxToolBytes
	DefaultLargeResultBytes     = config.DefaultLargeResultBytes
	DefaultMaxCatalogBytes      = config.DefaultMaxCatalogBytes
	DefaultMetricsPath          = config.DefaultMetricsPath
	DefaultMaxBodyBytes         = config.DefaultMaxBodyBytes
	DefaultBodyTimeout          = config.DefaultBodyTimeout
	DefaultWriteTimeout         = config.DefaultWriteTimeout
	DefaultSessionTimeout       = config.DefaultSessionTimeout
	DefaultMaxSessions          = config.DefaultMaxSessions
	DefaultMaxSessionsPerCaller = config.DefaultMaxSessionsPerCaller
	DefaultMaxRunsPerCaller     = config.DefaultMaxRunsPerCaller
	DefaultTaskTTL              = config.DefaultTaskTTL
)

// LoadConfig reads a YAML configuration file; see [config.Load].
func LoadConfig(path string) (*Config, error) { return config.Load(path) }

// ParseConfig parses YAML configuration bytes; see [config.Parse].
func ParseConfig(data []byte) (*Config, error) { return config.Parse(data) }
