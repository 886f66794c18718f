package toolkit

import (
	"github.com/sciencediscovery/scimcp/workspace"
)

// Services are the domain services the handlers close over.
type Services struct {
	Workspace *workspace.Workspace
}

// Catalogue returns every tool scimcp can serve, in a stable order. Which of
// them a session sees is mcpserver's business (groups and toolPolicy).
func Catalogue(svc Services) []Tool {
	return []Tool{
		listFiles(svc.Workspace),
		readFile(svc.Workspace),
	}
}
