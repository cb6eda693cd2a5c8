// Package media reads what providers bill media by from the media's own
// bytes, and counts the tokens they bill.
//
// # Sniffing
//
// [Sniff] tells an image's real type and pixel size from its header (PNG,
// JPEG, GIF, WebP), a PDF's page count (its /Type /Page objects, counted
// within a bounded prefix) and a WAV recording's duration (its RIFF fmt
// and data chunks). It never decodes pixels and reads at most what the
// headers need, so it is cheap on any file.
//
// # Data URLs
//
// [ParseDataURL] parses a data: URL. Its payload must be base64, and the
// type it declares must agree with the type its bytes sniff as: an image
// whose declared type lies is an error naming both.
//
// # Loading
//
// A [Loader] reads the media a job's input names, when the agent's first
// request is built: a path under the job's media roots (opened through
// [os.Root], so no ".." and no symlink leads out; stat-checked against the
// size cap before a byte is read; its type sniffed and checked against its
// extension and the field's kind), an https URL (fetched through the
// [netguard] SSRF guard from the allowed hosts only, or passed on for the
// provider to fetch) or a data: URL (checked as ParseDataURL does).
// [Loader.Hash] streams what a reference names through SHA-256, for the
// stale checks of a resumed agent. Errors are *[LoadError]s naming the
// reference and the reason.
//
// # Tokens
//
// [Tokens] counts a content part's prompt tokens the way a provider bills
// them ([Billing]): OpenAI's 512-px tiles, Anthropic's width×height/750, a
// per-page cost for documents and a per-second cost for audio. Dry runs
// and the simulator (sim://?media_tokens=openai|anthropic) count with it.
package media
