package provenance

import (
	"errors"
	"fmt"
)

// Error is a refusal the caller can act on: a path with no recorded history,
// an unknown revision, a revision whose content was not kept. Handlers turn
// it into an isError result whose text is Msg.
type Error struct {
	Code string // stable, machine-readable
	Msg  string // what went wrong and what to do next
	Err  error  // the underlying cause, if any
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// InputProblem marks the error as the caller's to act on (toolkit checks for
// this method).
func (e *Error) InputProblem() bool { return true }

// Error codes.
const (
	CodeNotFound        = "not_found"
	CodeNotRegular      = "not_regular_file"
	CodeUnknownRevision = "unknown_revision"
	CodeNoContent       = "content_not_kept"
	CodeCorrupt         = "corrupt"
	CodeNotText         = "not_text"
	CodeTooLarge        = "too_large"
)

func errorf(code string, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// IsCode reports whether err is a provenance *Error with the given code.
func IsCode(err error, code string) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Code == code
}
