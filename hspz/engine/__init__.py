"""The engines: the contract they share (contract), the CPU engine (cpu), the GPU engine (gpu,
kernels/*.cu, cuda_source) and the choice between them (backends)."""
