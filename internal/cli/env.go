package cli

import "os"

// environ reads the process environment: backends' API keys, the
// gateway's keys, BATCHAGENT_BUDGET. Tests replace it.
var environ = os.Getenv
