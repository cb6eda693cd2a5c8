package sqltool

import (
	"context"

	"github.com/batchagent/batchagent/tool"
)

// CheckStatement is checkStatement, for tests in package sqltool_test.
var CheckStatement = checkStatement

// RunUnchecked runs stmt through the sql_query tool t, made by Query, without
// the statement check: it tests the layers of read-only enforcement behind
// the check.
func RunUnchecked(ctx context.Context, t tool.Tool, stmt string, params ...any) (string, error) {
	return t.(*query).run(ctx, stmt, params)
}
