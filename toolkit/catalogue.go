package toolkit

import (
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/outputs"
)

// Services are the domain services the handlers close over.
type Services struct {
	Workspace *workspace.Workspace
	Outputs   *outputs.Store
}

// Catalogue returns every tool scimcp can serve, in a stable order. Which of
// them a session sees is mcpserver's business (groups and toolPolicy).
func Catalogue(svc Services) []Tool {
	return []Tool{
		listFiles(svc.Workspace),
		readFile(svc.Workspace),
		readToolOutput(svc.Outputs),
	}
}
