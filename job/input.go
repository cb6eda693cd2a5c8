package job

// Input is one input row: field name → value. Rows read by input.JSONL hold
// the values encoding/json decodes with UseNumber (string, json.Number,
// bool, nil, map[string]any, []any); rows read by input.CSV hold strings.
type Input map[string]any
