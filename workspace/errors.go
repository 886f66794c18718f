package workspace

import (
	"errors"
	"fmt"
)

// Error is a refusal the caller can act on: a bad path, a page past the end of a
// file, a directory where a file was expected. Handlers turn it into an isError
// tool result whose text is Msg; anything that is not an *Error is an
// infrastructure fault.
type Error struct {
	Code string // stable, machine-readable: "outside_workspace", "not_found", ...
	Msg  string // what went wrong and what to do next
	Err  error  // the underlying cause, if any (never shown to the model verbatim)
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// InputProblem marks the error as the caller's to fix. The toolkit checks for
// this method rather than importing this package's types.
func (e *Error) InputProblem() bool { return true }

// Error codes.
const (
	CodeInvalidPath      = "invalid_path"
	CodeOutsideWorkspace = "outside_workspace"
	CodeNotFound         = "not_found"
	CodeIsDirectory      = "is_directory"
	CodeNotRegular       = "not_regular_file"
	CodeOffsetPastEnd    = "offset_past_end"
	CodeInvalidRange     = "invalid_range"
	CodePermission       = "permission_denied"
	CodeExists           = "exists"
)

func errorf(code string, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// IsCode reports whether err is a workspace *Error with the given code.
func IsCode(err error, code string) bool {
	var we *Error
	return errors.As(err, &we) && we.Code == code
}
