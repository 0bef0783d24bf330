#pragma once
// CTNN_HOST_DEVICE marks a function callable from host and device code when compiled by nvcc, and
// expands to nothing for a plain C++ compiler, so one definition serves both backends.
#ifdef __CUDACC__
#define CTNN_HOST_DEVICE __host__ __device__
#else
#define CTNN_HOST_DEVICE
#endif
