// Package skills will hold the Agent Skills library (SKILL.md packages,
// frozen revisions, read-only staging, drafts). Nothing is served from it yet.
package skills
