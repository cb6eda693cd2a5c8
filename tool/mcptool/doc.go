// Package mcptool exposes the tools of a Model Context Protocol (MCP) server
// as [tool.Tool] values, so agents call them through a [tool.Pool] with the
// same coalescing, caching and limits as built-in tools.
//
// # Sessions
//
// [Connect] starts a server program and talks to it over its stdin and
// stdout ([ServerConfig.Command]), or reaches a server over the streamable
// HTTP transport ([ServerConfig.URL]). It initialises one session, lists the
// server's tools and keeps the session open until [Client.Close]. Every
// agent of a job shares that one session: calls from many goroutines are
// multiplexed over it as concurrent JSON-RPC requests, so a stdio server runs
// as a single process however many agents call it.
//
// # Side effects
//
// A tool the server does not declare read-only or idempotent (its
// annotations' readOnlyHint and idempotentHint, both false when absent, as
// MCP says to assume) may change something with every call: its Spec sets
// [tool.Spec.NotIdempotent], so an agent runs its calls only once the
// answer asking for them has streamed to its end, never mid-stream.
// [ServerConfig.Cacheable] vouches for the opposite and clears it.
//
// # Results
//
// A call returns the text of the result's content blocks, joined by
// newlines. Other blocks are described in brackets ("[image/png, 1234
// bytes]"), and a result with only structured content returns that content
// as compact JSON. A result the server marks as an error becomes a
// [*ToolError], which the agent sends back to the model like any tool error.
// A call on a session that has ended (the server exited, the HTTP session
// expired, or the Client was closed) fails with an error wrapping
// [ErrSessionClosed] and [tool.ErrFatal]: every later call would fail too,
// so the agent stops instead of asking the model to work around it.
//
// The package uses the official MCP Go SDK,
// github.com/modelcontextprotocol/go-sdk.
package mcptool
