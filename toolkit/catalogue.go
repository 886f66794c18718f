package toolkit

import (
	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/downloads"
	"github.com/sciencediscovery/scimcp/workspace/outputs"
	"github.com/sciencediscovery/scimcp/workspace/plans"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/timers"
)

// Services are the domain services the handlers close over.
type Services struct {
	Workspace *workspace.Workspace
	Outputs   *outputs.Store
	// Executions runs run_shell and friends; nil leaves them out.
	Executions *runner.Executions
	// PaperRunner runs pdftotext for paper_extract_pdf; nil leaves it out.
	PaperRunner runner.Runner
	// Provenance backs get_file_provenance; nil leaves it out.
	Provenance *provenance.Index
	// Artifacts backs declare_artifact, list_artifacts and read_artifact,
	// and get_file_provenance's artifact links; nil leaves them out.
	Artifacts *artifacts.Store
	// Plans backs update_plan; nil leaves it out.
	Plans *plans.Store
	// Timers backs timer_create, timer_list and timer_cancel; nil leaves them out.
	Timers *timers.Service
	// Downloads lets paper_extract_pdf take an artifact_download job; nil
	// leaves it to workspace paths.
	Downloads *downloads.Service
}

// Catalogue returns every tool scimcp can serve, in a stable order. Which of
// them a session sees is mcpserver's business (groups and toolPolicy).
func Catalogue(svc Services) []Tool {
	tools := []Tool{
		listFiles(svc.Workspace),
		readFile(svc.Workspace),
		readToolOutput(svc.Outputs),
	}
	if svc.Executions != nil {
		tools = append(tools,
			runShell(svc.Workspace, svc.Executions),
			executionStatus(svc.Executions),
			executionLogs(svc.Executions),
			executionCancel(svc.Executions),
		)
	}
	if svc.Provenance != nil {
		tools = append(tools, GetFileProvenance(svc.Provenance, svc.Artifacts))
	}
	if svc.Artifacts != nil {
		tools = append(tools, ArtifactTools(svc.Artifacts)...)
	}
	tools = append(tools, Orchestration(svc.Plans, svc.Timers)...)
	if svc.PaperRunner != nil {
		tools = append(tools, paperExtract(svc.Workspace, svc.PaperRunner, svc.Downloads))
	}
	return tools
}
