package backendtest

import (
	"bytes"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// EventFrame encodes one event of an AWS event stream, as Bedrock's
// ConverseStream sends it: message type "event", the given event type,
// a JSON payload.
func EventFrame(eventType, payload string) []byte {
	var msg eventstream.Message
	msg.Headers.Set(":message-type", eventstream.StringValue("event"))
	msg.Headers.Set(":event-type", eventstream.StringValue(eventType))
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Payload = []byte(payload)
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		// Encode fails only on headers or a payload past the format's
		// limits, which no test frame reaches.
		panic("backendtest: encode " + eventType + " frame: " + err.Error())
	}
	return buf.Bytes()
}
