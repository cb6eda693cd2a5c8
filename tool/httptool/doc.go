// Package httptool provides http_get ([Get]), a tool that lets agents fetch
// a URL with an HTTP GET, as a [tool.Tool] for a [tool.Pool].
//
// # Confinement
//
// The tool fetches only from the hosts on its allowlist
// ([Config.AllowHosts]), also after a redirect, and never connects to
// loopback, private, link-local (which holds cloud metadata addresses) or
// other non-public addresses unless [Config.AllowPrivate] is set. The
// address check is made on the address actually connected to, so a host
// name that resolves to a private address is refused too. The zero
// [Config] allows nothing.
//
// # Results
//
// A call returns the status line, the Content-Type and the body as text.
// Binary bodies are refused, long bodies are cut on a UTF-8 boundary, and
// every call is bounded in time ([Config.Timeout]). Refusals and failures
// are errors whose text is meant for the model, which the Pool sends back
// as the tool's result; malformed arguments wrap [tool.ErrBadArguments].
//
// Each call uses its own connection, so the tool holds nothing between
// calls and needs no Close.
//
// The package imports only the standard library and package tool.
package httptool
