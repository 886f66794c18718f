// Package npu will hold the host NPU broker (allowlisted workloads, session
// ownership) and its client behind run_npu_job. Nothing is served from it yet.
package npu
