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
// # Tokens
//
// [Tokens] counts a content part's prompt tokens the way a provider bills
// them ([Billing]): OpenAI's 512-px tiles, Anthropic's width×height/750, a
// per-page cost for documents and a per-second cost for audio. Dry runs
// and the simulator (sim://?media_tokens=openai|anthropic) count with it.
package media
